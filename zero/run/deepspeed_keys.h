// The table of every key DeepSpeed's config documents (zero/run/deepspeed_keys.cpp),
// as the mapping (zero/run/deepspeed_config.cpp) asks it: is a key known, why
// does a known key have no effect here, which known key is nearest a typo.
#pragma once

#include <string>

namespace deepspeed_detail {

struct KnownKey {
    const char* path;
    const char* why;
};
// the `why` of a whole section this trainer does not have (compared by address)
extern const char* const OPAQUE;

// the table's entry for a dotted path ("zero_optimization.stage"), or nullptr
const KnownKey* known_key(const std::string& path);
// The known key of section `prefix` ("" or "zero_optimization.") nearest to `key`.
std::string nearest_known_key(const std::string& prefix, const std::string& key);
std::string lower(std::string s);

}  // namespace deepspeed_detail
