// SafetensorsFile::Open on arbitrary bytes (through an in-memory file: the reader maps a path).
// Every tensor of a file that opens must lie inside the file: its first and last bytes are read,
// so that a view past the mapping faults.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "fuzz_support.h"
#include "model/safetensors.h"

// Where the bytes read go, so that the reads are not optimized away.
volatile unsigned bytes_read_sink;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using convoy::fuzz::Check;
  absl::StatusOr<std::unique_ptr<convoy::SafetensorsFile>> file =
      convoy::SafetensorsFile::Open(convoy::fuzz::BytesAsFile(data, size));
  if (!file.ok()) return 0;
  unsigned sum = 0;
  for (const auto& [name, view] : (*file)->tensors()) {
    Check(name == view.name, "tensor map key != view name");
    Check(view.num_bytes <= size, "tensor larger than the file");
    const int64_t elements = view.NumElements();
    Check(elements >= 0, "negative element count");
    if (view.num_bytes == 0) continue;
    sum +=
        static_cast<unsigned>(view.data[0]) + static_cast<unsigned>(view.data[view.num_bytes - 1]);
  }
  bytes_read_sink = sum;
  return 0;
}
