#include "worker_pool/protocol/protocol.h"

namespace spawnpool::protocol {
namespace {

constexpr std::uint64_t round_up(std::uint64_t n, std::uint64_t multiple) {
  return (n + multiple - 1) / multiple * multiple;
}

// Offsets inside a slot: control line, request header + payload, reply header + output.
constexpr std::uint64_t kRequestOffset = sizeof(SlotControl);
constexpr std::uint64_t request_payload_offset() {
  return kRequestOffset + sizeof(RequestHeader);
}
std::uint64_t reply_offset(std::uint64_t request_capacity) {
  return round_up(request_payload_offset() + request_capacity, 64);
}

}  // namespace

std::uint64_t slot_size_for(std::uint64_t request_capacity, std::uint64_t output_capacity,
                            std::uint64_t page_size) {
  return round_up(reply_offset(request_capacity) + sizeof(ReplyHeader) + output_capacity,
                  page_size);
}

std::uint64_t segment_size(const SegmentHeader& header, std::uint64_t page_size) {
  return page_size + header.slot_size * header.slot_count;
}

SlotView slot_at(void* base, const SegmentHeader& header, std::uint32_t index,
                 std::uint64_t page_size) {
  char* slot = static_cast<char*>(base) + page_size + header.slot_size * index;
  char* reply = slot + reply_offset(header.request_capacity);
  return SlotView{reinterpret_cast<SlotControl*>(slot),
                  reinterpret_cast<RequestHeader*>(slot + kRequestOffset),
                  slot + request_payload_offset(),
                  reinterpret_cast<ReplyHeader*>(reply),
                  reply + sizeof(ReplyHeader)};
}

bool header_is_valid(const SegmentHeader& header, std::uint64_t mapped_size,
                     std::uint64_t page_size) {
  if (header.magic != kMagic || header.version != kVersion) return false;
  if (header.slot_count == 0 || header.slot_count > 4096) return false;
  if (header.request_capacity > (1ull << 32) || header.output_capacity > (1ull << 32))
    return false;
  if (header.slot_size !=
      slot_size_for(header.request_capacity, header.output_capacity, page_size))
    return false;
  return segment_size(header, page_size) <= mapped_size;
}

}  // namespace spawnpool::protocol
