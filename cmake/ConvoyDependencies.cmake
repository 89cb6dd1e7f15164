# Every dependency comes from Debian's packages; scripts/setup.sh installs them.
find_package(Threads REQUIRED)
find_package(OpenMP REQUIRED COMPONENTS CXX)
find_package(absl REQUIRED)
find_package(spdlog REQUIRED)
# What every target links for logging. Under ThreadSanitizer spdlog compiles into our own objects
# (its header-only form, -fsanitize=thread like them), so that TSan sees its async logger hand
# messages and the logger's last reference between threads; Debian's libspdlog is not
# instrumented. All or none: the two forms each have their own registry.
add_library(convoy_spdlog INTERFACE)
if(CONVOY_SANITIZE STREQUAL "thread")
  target_link_libraries(convoy_spdlog INTERFACE spdlog::spdlog_header_only)
else()
  target_link_libraries(convoy_spdlog INTERFACE spdlog::spdlog)
endif()
find_package(nlohmann_json 3 REQUIRED)
find_package(dnnl REQUIRED)
# Regular expressions with Unicode properties and lookahead (tokenizer pre-splitting).
find_package(PkgConfig REQUIRED)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
# Unicode normalization forms (a tokenizer.json's NFC, NFD, NFKC, NFKD normalizers).
pkg_check_modules(UTF8PROC REQUIRED IMPORTED_TARGET libutf8proc)

if(CONVOY_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(CONVOY_BUILD_BENCHMARKS)
  find_package(benchmark REQUIRED)
endif()
