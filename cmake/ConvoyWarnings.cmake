# Warnings are errors for the project's own C++ sources. Call convoy_target_warnings(<target>) on
# every target built from our code (generated protobuf code is compiled without -Werror).
function(convoy_target_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Werror>)
  if(CONVOY_SANITIZE AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # gcc 12 with sanitizers warns "may be used uninitialized" inside libstdc++'s own
    # std::function and std::regex: false positives that a plain build does not show.
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wno-maybe-uninitialized>)
  endif()
endfunction()

if(CONVOY_NATIVE)
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-march=native>)
endif()
