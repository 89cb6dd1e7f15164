#include "test_paths.h"

namespace convoy {

const std::string& TestSourceDir() {
  static const std::string* const dir = new std::string(CONVOY_SOURCE_DIR);
  return *dir;
}

const std::string& TestBinaryDir() {
  static const std::string* const dir = new std::string(CONVOY_BINARY_DIR);
  return *dir;
}

}  // namespace convoy
