// The rendezvous's internals, shared by its three .cpp files (zero/comm/bootstrap.h
// is the interface and describes the protocols): the wire format's sizes and
// magic strings, the helpers both transports use, and the transports' entry
// points that rendezvous() picks from (each declared below with its file).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "zero/comm/bootstrap.h"

namespace bootstrap_detail {

constexpr size_t HOST_BYTES = 256, GPU_BYTES = 128, JOB_BYTES = 112;
constexpr size_t RECORD_BYTES = 8 + 4 + 4 + HOST_BYTES + GPU_BYTES + JOB_BYTES;  // 512
constexpr size_t REPLY_HEADER_BYTES = 16;
constexpr uint32_t MAX_REPLY_BYTES = 64u << 20;
constexpr char RECORD_MAGIC[9] = "ZRDVREC1";
constexpr char REPLY_MAGIC[9] = "ZRDVRPL1";
constexpr char FILE_MAGIC[9] = "ZRDVFIL1";
static_assert(RECORD_BYTES == 512, "the record is 512 bytes on the wire");

using Clock = std::chrono::steady_clock;

// bootstrap.cpp: deadlines, the wire's big-endian integers and NUL-padded
// strings, and the messages' pieces
int ms_until(Clock::time_point deadline);
Clock::time_point after_seconds(double s);
void put_u32(uint8_t* p, uint32_t v);
uint32_t get_u32(const uint8_t* p);
void put_str(uint8_t* p, size_t field, const std::string& s);
std::string get_str(const uint8_t* p, size_t field);
std::string lower(std::string s);
// "2, 3, 7" (at most `limit` numbers, then "and N more")
std::string rank_list(const std::vector<int>& ranks, size_t limit = 16);
// make_payload(recs), or {} with `err` set to what it threw
std::vector<uint8_t> run_payload_fn(const BootstrapPayloadFn& make_payload,
                                    const std::vector<BootstrapRecord>& recs, std::string& err);

// bootstrap_tcp.cpp: rank 0 gathers, validates and answers; a non-zero rank
// connects, sends its record and awaits the reply
std::vector<uint8_t> serve(const BootstrapRecord& mine, const BootstrapPayloadFn& make_payload,
                           const BootstrapOptions& o);
std::vector<uint8_t> join(const BootstrapRecord& mine, const BootstrapOptions& o);

// bootstrap_file.cpp: rank 0 writes the file; the others wait for it
std::vector<uint8_t> file_publish(const BootstrapRecord& mine, const BootstrapPayloadFn& make_payload,
                                  const BootstrapOptions& o);
std::vector<uint8_t> file_wait(const BootstrapRecord& mine, const BootstrapOptions& o);

}  // namespace bootstrap_detail
