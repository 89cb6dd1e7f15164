# CONVOY_SANITIZE=address,undefined or thread instruments every C and C++ target (ours and the
# generated protobuf code) and the link. CUDA code is not instrumented; a sanitized build is a
# CPU build (scripts/sanitize.sh configures CONVOY_ENABLE_CUDA=OFF).
if(CONVOY_SANITIZE)
  if(NOT CONVOY_SANITIZE MATCHES "^(address,undefined|undefined,address|address|undefined|thread)$")
    message(FATAL_ERROR "CONVOY_SANITIZE: address,undefined or thread, not '${CONVOY_SANITIZE}'")
  endif()
  # -g1: line tables, all a report's stack needs to name each frame's function, file and line;
  # full debug information makes the build far slower and larger for nothing the reports use.
  set(convoy_sanitize_flags -fsanitize=${CONVOY_SANITIZE} -fno-omit-frame-pointer -g1)
  if(CONVOY_SANITIZE MATCHES "undefined")
    # A report is a failure, not a message on stderr that a passing test would hide.
    list(APPEND convoy_sanitize_flags -fno-sanitize-recover=undefined)
  endif()
  if(CONVOY_SANITIZE STREQUAL "thread" AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # gcc warns that TSan does not model std::atomic_thread_fence, which Boost.Asio's handler
    # completion uses (std_fenced_block). Asio hands handlers over under its scheduler's mutex,
    # which TSan does see; the fence adds nothing it relies on there.
    list(APPEND convoy_sanitize_flags -Wno-tsan)
  endif()
  add_link_options(${convoy_sanitize_flags})
  # -O1, as the sanitizers' documentation builds (and the fuzzers below): it overrides the build
  # type's -O3, under which gcc compiles an instrumented file about 1.7 times as slowly (measured:
  # grammar/json_schema.cc 26 s at -O3 and 15 s at -O1 under ASan+UBSan, 11 s uninstrumented at
  # -O3), and CI builds every test this way on every run.
  list(APPEND convoy_sanitize_flags -O1)
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:${convoy_sanitize_flags}>")
endif()

# convoy_sanitized_at_full_speed(<target>): the target's own sources compile at -O3 under the
# sanitizers too, still instrumented. For the CPU executor's arithmetic, which the model tests
# spend nearly all their time in.
function(convoy_sanitized_at_full_speed target)
  if(CONVOY_SANITIZE)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-O3>)
  endif()
endfunction()

# clang's thread-safety analysis over the annotations (GUARDED_BY, EXCLUSIVE_LOCKS_REQUIRED, ...)
# that the headers state: with CONVOY_THREAD_SAFETY=ON and clang, a lock a comment promises but
# the code does not take is a compile error.
if(CONVOY_THREAD_SAFETY)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "CONVOY_THREAD_SAFETY needs clang (CXX=clang++)")
  endif()
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-Wthread-safety>)
endif()

# CONVOY_FUZZ=ON (clang): every C and C++ target is compiled with libFuzzer's coverage hooks and
# AddressSanitizer + UndefinedBehaviorSanitizer; the targets in fuzz/ link libFuzzer's main
# (-fsanitize=fuzzer). Any sanitizer report aborts, so that libFuzzer keeps the input as a crash.
# -O1, as libFuzzer's documentation builds: it overrides the build type's -O3, which compiles far
# more slowly under the sanitizers.
if(CONVOY_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "CONVOY_FUZZ needs clang (CC=clang CXX=clang++)")
  endif()
  if(CONVOY_SANITIZE)
    message(FATAL_ERROR "CONVOY_FUZZ brings its own sanitizers: leave CONVOY_SANITIZE empty")
  endif()
  set(convoy_fuzz_flags -fsanitize=fuzzer-no-link,address,undefined
    -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g -O1)
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:${convoy_fuzz_flags}>")
  add_link_options(-fsanitize=address,undefined)
endif()
