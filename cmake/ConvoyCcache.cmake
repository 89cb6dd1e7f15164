# C, C++ and CUDA compile through ccache when it is installed (scripts/setup.sh installs it) and
# CONVOY_CCACHE is on: a rebuild of unchanged sources, in any build folder of the same
# configuration, takes its objects from the cache (~/.cache/ccache unless CCACHE_DIR says
# otherwise). CI shares one cache between this machine's build and the fresh Debian root's, whose
# compiler and headers come from the same packages (.ci/run, scripts/fresh-root.sh).
#
# The tests compile over a precompiled header (tests/CMakeLists.txt): ccache caches those compiles
# only when told to ignore the header's __DATE__/__TIME__ and the macros defined with it
# (sloppiness pch_defines,time_macros; no test reads either).
# CCACHE_BASEDIR: paths under the source tree enter the hash relative to the build folder, so that
# two checkouts at different paths share objects. Only tests/test_paths.cc embeds the checkout's
# path (and the few tests that name a program's path in the build folder).
# CCACHE_NOHASHDIR=true: a compile with debug information (-g: the sanitizer and fuzz builds)
# leaves the folder it ran in out of the hash. ccache hashes that folder by default, for the debug
# information's compilation directory, so those builds shared nothing between checkouts, and each
# CI run's clean checkout compiled them afresh. The cost: a sanitizer report's file paths may
# begin with the build folder of the checkout that filled the cache (the rest of the path is right).
#
# A launcher the caller chose (-DCMAKE_CXX_COMPILER_LAUNCHER=...) is kept.
if(NOT CONVOY_CCACHE OR CMAKE_CXX_COMPILER_LAUNCHER)
  return()
endif()
find_program(CONVOY_CCACHE_PROGRAM ccache)
if(NOT CONVOY_CCACHE_PROGRAM)
  return()
endif()
set(convoy_ccache_launcher ${CMAKE_COMMAND} -E env
  CCACHE_SLOPPINESS=pch_defines,time_macros CCACHE_BASEDIR=${CMAKE_SOURCE_DIR} CCACHE_NOHASHDIR=true
  ${CONVOY_CCACHE_PROGRAM})
set(CMAKE_C_COMPILER_LAUNCHER ${convoy_ccache_launcher})
set(CMAKE_CXX_COMPILER_LAUNCHER ${convoy_ccache_launcher})
# nvcc too (ccache knows its options; the kernels for three architectures took about 90 s of
# every CI run's first build before).
set(CMAKE_CUDA_COMPILER_LAUNCHER ${convoy_ccache_launcher})
message(STATUS "convoy: compiling through ${CONVOY_CCACHE_PROGRAM}")
