// Fuzz target: the strict JSON parser (zero/base/json.h), and the accessors
// the DeepSpeed reader uses on what it returns.
#include "test/fuzz/fuzz_util.h"
#include "zero/base/json.h"

static size_t walk(const JsonValue& v, int depth) {
    size_t n = v.where().size();
    if (depth > 300) return n;
    if (v.is_object())
        for (const JsonMember& m : v.members()) n += m.key.size() + walk(m.value, depth + 1);
    else if (v.is_array())
        for (size_t i = 0; i < v.size(); i++) n += walk(v[i], depth + 1);
    else if (v.is_number()) n += v.number_text().size() + (v.is_integer_in(-1000, 1000) ? 1 : 0) + (v.as_number() > 0);
    else if (v.is_string()) n += v.as_string().size();
    return n;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    refusal_ok([&] {
        JsonValue v = parse_json(std::string((const char*)data, size), "fuzz.json");
        walk(v, 0);
    });
    return 0;
}
