// The table of the keys DeepSpeed's config documents that the mapping
// (zero/run/deepspeed_config.cpp) does not read (zero/run/deepspeed_keys.cpp), as the
// mapping asks it: is a key known, why does it have no effect here, which known key
// is a typo away.
#pragma once

#include <string>
#include <vector>

namespace deepspeed_detail {

struct KnownKey {
    const char* path;
    const char* why;
};
// the `why` of a whole section this trainer does not have (compared by address)
extern const char* const OPAQUE;

// the table's entry for a dotted path ("zero_optimization.stage"), or nullptr
const KnownKey* known_key(const std::string& path);
// The key of section `prefix` ("" or "zero_optimization.") a typo away from `key`, among
// the table's and `names` (those the mapping reads there), or "".
std::string nearest_known_key(const std::string& prefix, const std::string& key, std::vector<std::string> names);
std::string lower(std::string s);

}  // namespace deepspeed_detail
