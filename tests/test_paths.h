// Where the checkout and its build folder are, for tests that read fixtures, configs or files the
// build wrote. Only test_paths.cc embeds the two paths: every other test object is then the same
// whatever the checkout's path, and the compiler cache shares it between checkouts
// (cmake/ConvoyCcache.cmake), as CI's checkout and a developer's do.
#ifndef CONVOY_TESTS_TEST_PATHS_H_
#define CONVOY_TESTS_TEST_PATHS_H_

#include <string>

namespace convoy {

// The source tree's root, without a trailing slash.
const std::string& TestSourceDir();
// The build folder's root, without a trailing slash.
const std::string& TestBinaryDir();

}  // namespace convoy

#endif  // CONVOY_TESTS_TEST_PATHS_H_
