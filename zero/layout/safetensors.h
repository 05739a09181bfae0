// The safetensors format (Hugging Face's weight files), read and written by
// our own code: an 8-byte little-endian header length N, N bytes of JSON, then
// the tensors' raw little-endian bytes. The JSON maps each tensor name to
//   {"dtype": "F32" | "F16" | "BF16" | ..., "shape": [d0, d1, ...],
//    "data_offsets": [begin, end]}      (bytes, relative to the end of the header)
// and may hold "__metadata__": {string: string}.
//
// The reader checks everything before any tensor is used, and refuses a bad
// file with one line naming it: a header length beyond the file (or absurdly
// large), JSON that is not such an object, an unknown dtype, a shape whose
// element count disagrees with the byte range, ranges that overlap, leave holes
// or run past the end of the file. Reading a tensor as fp32 (F32, F16 or BF16
// on disk) checks its shape against the one the caller expects.
//
// The definitions are in zero/layout/safetensors.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

struct SafetensorsTensor {
    std::string name;
    std::string dtype;            // as written: "F32", "BF16", ...
    size_t elem_size = 0;         // bytes per element of that dtype
    std::vector<int64_t> shape;
    uint64_t begin = 0, end = 0;  // byte range in the data section
    size_t numel() const;
};

// The element count of a shape (1 for a scalar's []).
size_t shape_numel(const std::vector<int64_t>& shape);

class SafetensorsReader {
  public:
    explicit SafetensorsReader(const std::string& path);  // validates the whole header

    const std::string& path() const { return path_; }
    const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
    const SafetensorsTensor* find(const std::string& name) const;  // nullptr if absent

    // Tensor `name`, which must be there with dtype F32, F16 or BF16 (else fails with one line).
    const SafetensorsTensor& float_tensor(const std::string& name) const;
    // Tensor `name` as fp32 (exact for F32, F16 and BF16 on disk). Fails with one
    // line if it is missing, has another dtype, or its shape is not `shape`.
    std::vector<float> read_f32(const std::string& name, const std::vector<int64_t>& shape) const;

  private:
    std::string path_;
    uint64_t data_start_ = 0;  // file offset of the data section
    std::vector<SafetensorsTensor> tensors_;
};

// Collects tensors, then writes the file atomically: the header (padded with
// spaces to a multiple of 8 bytes, so the data is aligned) and the data in the
// order the tensors were added.
class SafetensorsWriter {
  public:
    void add_metadata(const std::string& key, const std::string& value);
    // `data`: numel(shape) fp32 values, little-endian on disk; they are copied.
    void add_f32(const std::string& name, const std::vector<int64_t>& shape, std::vector<float> data);
    // The same for any dtype: `count` (= numel(shape)) elements of `elem_size` bytes.
    void add(const std::string& name, const std::string& dtype, const std::vector<int64_t>& shape, const void* data,
             size_t count, size_t elem_size);
    void write(const std::string& path) const;

  private:
    struct Entry {
        std::string name, dtype;
        std::vector<int64_t> shape;
        std::vector<char> bytes;
    };
    std::vector<Entry> entries_;
    std::vector<std::pair<std::string, std::string>> metadata_;
};
