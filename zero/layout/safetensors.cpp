// The safetensors reader and writer of zero/layout/safetensors.h.
#include "zero/layout/safetensors.h"

#include <algorithm>
#include <cstring>

#include "zero/base/common.h"
#include "zero/base/dtype.h"
#include "zero/base/json.h"

namespace {

// Element sizes of the format's dtypes; 0 for a name it does not define.
size_t dtype_elem_size(const std::string& d) {
    if (d == "F64" || d == "I64" || d == "U64") return 8;
    if (d == "F32" || d == "I32" || d == "U32") return 4;
    if (d == "F16" || d == "BF16" || d == "I16" || d == "U16") return 2;
    if (d == "BOOL" || d == "U8" || d == "I8" || d == "F8_E5M2" || d == "F8_E4M3") return 1;
    return 0;
}

// A header larger than this is not a weight file's (the format's own limit).
constexpr uint64_t kMaxHeaderBytes = 100u << 20;

std::string shape_text(const std::vector<int64_t>& shape, const char* separator = ", ") {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? separator : "") + std::to_string(shape[i]);
    return s + "]";
}

// Quoted and escaped for a JSON document.
std::string json_quote(const std::string& s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\', out += (char)c;
        } else if (c < 0x20) {
            out += strf("\\u%04x", c);
        } else {
            out += (char)c;
        }
    }
    return out + "\"";
}

}  // namespace

size_t shape_numel(const std::vector<int64_t>& shape) {
    size_t n = 1;
    for (int64_t d : shape) n *= (size_t)d;
    return n;
}

size_t SafetensorsTensor::numel() const { return shape_numel(shape); }

SafetensorsReader::SafetensorsReader(const std::string& path) : path_(path) {
    const char* p = path.c_str();
    FILE* f = open_file(path, "rb");
    const uint64_t size = file_size(f);
    CHECK(size >= 8, "%s: not a safetensors file: %llu bytes, too short for the header length", p,
          (unsigned long long)size);
    uint8_t len_bytes[8];
    read_exact(f, len_bytes, 8, path);
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; --i) header_len = header_len << 8 | len_bytes[i];
    CHECK(header_len >= 2 && header_len <= kMaxHeaderBytes && header_len <= size - 8,
          "%s: bad header length %llu (the file has %llu bytes after the length)", p, (unsigned long long)header_len,
          (unsigned long long)(size - 8));
    std::string header(header_len, '\0');
    read_exact(f, header.data(), header_len, path);
    fclose(f);
    data_start_ = 8 + header_len;
    const uint64_t data_size = size - data_start_;

    JsonValue root = parse_json(header, path + " (header)");
    CHECK(root.is_object(), "%s: the header is %s, not a JSON object", p, root.type_name());
    for (const JsonMember& m : root.members()) {
        if (m.key == "__metadata__") {
            CHECK(m.value.is_object(), "%s: __metadata__ is not an object", p);
            for (const JsonMember& kv : m.value.members()) {
                CHECK(kv.value.is_string(), "%s: __metadata__ value of \"%s\" is not a string", p, kv.key.c_str());
            }
            continue;
        }
        const char* name = m.key.c_str();
        CHECK(m.value.is_object(), "%s: tensor \"%s\": expected an object", p, name);
        const JsonValue* dtype = m.value.find("dtype");
        const JsonValue* shape = m.value.find("shape");
        const JsonValue* offsets = m.value.find("data_offsets");
        CHECK(dtype && dtype->is_string() && shape && shape->is_array() && offsets && offsets->is_array(),
              "%s: tensor \"%s\" needs \"dtype\" (a string), \"shape\" and \"data_offsets\" (arrays)", p, name);
        SafetensorsTensor t{.name = m.key, .dtype = dtype->as_string(), .elem_size = dtype_elem_size(dtype->as_string())};
        CHECK(t.elem_size > 0, "%s: tensor \"%s\": unknown dtype \"%s\"", p, name, t.dtype.c_str());
        uint64_t bytes = t.elem_size;
        for (const JsonValue& d : shape->as_array()) {
            CHECK(d.is_integer_in(0, (1LL << 40)), "%s: tensor \"%s\": bad dimension in its shape", p, name);
            t.shape.push_back(d.as_integer());
            CHECK(d.as_integer() == 0 || bytes <= (1ULL << 50) / (uint64_t)d.as_integer(),
                  "%s: tensor \"%s\": shape too large", p, name);
            bytes *= (uint64_t)d.as_integer();
        }
        CHECK(offsets->size() == 2 && (*offsets)[0].is_integer_in(0, LLONG_MAX) &&
                  (*offsets)[1].is_integer_in(0, LLONG_MAX),
              "%s: tensor \"%s\": data_offsets must be two non-negative integers", p, name);
        t.begin = (uint64_t)(*offsets)[0].as_integer();
        t.end = (uint64_t)(*offsets)[1].as_integer();
        CHECK(t.begin <= t.end && t.end <= data_size,
              "%s: tensor \"%s\": data_offsets [%llu, %llu] out of range (the data section has %llu bytes)", p, name,
              (unsigned long long)t.begin, (unsigned long long)t.end, (unsigned long long)data_size);
        CHECK(t.end - t.begin == bytes,
              "%s: tensor \"%s\": data_offsets span %llu bytes but %s of shape %s needs %llu", p, name,
              (unsigned long long)(t.end - t.begin), t.dtype.c_str(), shape_text(t.shape).c_str(),
              (unsigned long long)bytes);
        tensors_.push_back(std::move(t));
    }
    // The data section is the tensors end to end: no overlaps, no holes.
    std::vector<const SafetensorsTensor*> by_offset;
    for (const SafetensorsTensor& t : tensors_) by_offset.push_back(&t);
    std::sort(by_offset.begin(), by_offset.end(), [](auto a, auto b) {
        return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
    });
    uint64_t at = 0;
    for (const SafetensorsTensor* t : by_offset) {
        CHECK(t->begin >= at, "%s: tensor \"%s\" overlaps the tensor before it (bytes %llu..%llu, that one ends at %llu)",
              p, t->name.c_str(), (unsigned long long)t->begin, (unsigned long long)t->end, (unsigned long long)at);
        CHECK(t->begin == at, "%s: a hole of %llu bytes before tensor \"%s\"", p,
              (unsigned long long)(t->begin - at), t->name.c_str());
        at = t->end;
    }
    CHECK(at == data_size, "%s: %llu bytes after the last tensor", p, (unsigned long long)(data_size - at));
}

const SafetensorsTensor* SafetensorsReader::find(const std::string& name) const {
    for (const SafetensorsTensor& t : tensors_)
        if (t.name == name) return &t;
    return nullptr;
}

const SafetensorsTensor& SafetensorsReader::float_tensor(const std::string& name) const {
    const SafetensorsTensor* t = find(name);
    CHECK(t, "%s: missing tensor \"%s\"", path_.c_str(), name.c_str());
    CHECK(t->dtype == "F32" || t->dtype == "F16" || t->dtype == "BF16",
          "%s: tensor \"%s\" has dtype %s; expected F32, F16 or BF16", path_.c_str(), name.c_str(), t->dtype.c_str());
    return *t;
}

std::vector<float> SafetensorsReader::read_f32(const std::string& name, const std::vector<int64_t>& shape) const {
    const SafetensorsTensor* t = &float_tensor(name);
    CHECK(t->shape == shape, "%s: tensor \"%s\" has shape %s; expected %s", path_.c_str(), name.c_str(),
          shape_text(t->shape).c_str(), shape_text(shape).c_str());
    const size_t n = t->numel();
    if (n == 0) return {};  // a shape with a zero dimension holds no bytes (and memcpy may not take null)
    std::vector<char> raw(t->end - t->begin);
    FILE* f = open_file(path_, "rb");
    seek_to(f, data_start_ + t->begin, path_);
    read_exact(f, raw.data(), raw.size(), path_);
    fclose(f);
    std::vector<float> out(n);
    if (t->dtype == "F32") {
        memcpy(out.data(), raw.data(), n * 4);
    } else {
        std::vector<uint16_t> bits(n);
        memcpy(bits.data(), raw.data(), n * 2);
        for (size_t i = 0; i < n; ++i)
            out[i] = t->dtype == "BF16" ? to_float(bf16{bits[i]}) : half_bits_to_float(bits[i]);
    }
    return out;
}

void SafetensorsWriter::add_metadata(const std::string& key, const std::string& value) {
    metadata_.emplace_back(key, value);
}

void SafetensorsWriter::add_f32(const std::string& name, const std::vector<int64_t>& shape, std::vector<float> data) {
    add(name, "F32", shape, data.data(), data.size(), 4);
}

void SafetensorsWriter::add(const std::string& name, const std::string& dtype, const std::vector<int64_t>& shape,
                            const void* data, size_t count, size_t elem_size) {
    CHECK(shape_numel(shape) == count, "safetensors: tensor \"%s\": %zu values for shape %s", name.c_str(), count,
          shape_text(shape).c_str());
    Entry e{name, dtype, shape, std::vector<char>(count * elem_size)};
    if (count) memcpy(e.bytes.data(), data, e.bytes.size());
    entries_.push_back(std::move(e));
}

void SafetensorsWriter::write(const std::string& path) const {
    std::string header = "{";
    if (!metadata_.empty()) {
        header += "\"__metadata__\":{";
        for (size_t i = 0; i < metadata_.size(); ++i)
            header += std::string(i ? "," : "") + json_quote(metadata_[i].first) + ":" + json_quote(metadata_[i].second);
        header += "}";
    }
    uint64_t offset = 0;
    for (size_t i = 0; i < entries_.size(); ++i) {
        const Entry& e = entries_[i];
        header += std::string(i || !metadata_.empty() ? "," : "") + json_quote(e.name) + ":{\"dtype\":\"" + e.dtype +
                  "\",\"shape\":" + shape_text(e.shape, ",") + ",\"data_offsets\":[" + std::to_string(offset) + "," +
                  std::to_string(offset + e.bytes.size()) + "]}";
        offset += e.bytes.size();
    }
    header += "}";
    while ((8 + header.size()) % 8) header += ' ';  // the data starts 8-byte aligned
    uint8_t len[8];
    for (int i = 0; i < 8; ++i) len[i] = (uint8_t)((uint64_t)header.size() >> (8 * i));
    AtomicFile out(path);
    out.write(len, 8);
    out.write(header.data(), header.size());
    for (const Entry& e : entries_) out.write(e.bytes.data(), e.bytes.size());
    out.commit();
}
