// The promise of sharing, on any coordination file: a share request and a whole request planned
// one after the other never put a whole owner and a share owner on one GPU, never hand out more
// live shares of a GPU than its K, never two shares of one GPU to one request, and never a share
// index that a live share already has.
//
// Input: byte 0, the number of GPUs (1 to 8); byte 1, the amount of shares (1 to 4); byte 2,
// pack or spread; bytes 3 to 10, each GPU's K (0: not declared, else 2 to 9); the rest, the
// coordination file's text. An owner runs when its pid is odd.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "host/coordination/Coordination.h"
#include "host/coordination/ShareAllocation.h"

namespace {

using namespace flink::coordination;

bool runs(const Owner& owner) { return owner.pid % 2 == 1; }

void check(bool condition) {
  if (!condition) std::abort();
}

/// The live share indices (each once) and whether a running owner holds `gpu` whole, among
/// `records`.
struct Held {
  std::vector<unsigned> shares;
  bool whole = false;
};

Held heldOf(const std::vector<Record>& records, const std::string& gpu) {
  Held held;
  const flink::discovery::UnitIndex index = flink::discovery::UnitIndex::ofIdentifiers({gpu}, {});
  for (const Record& record : records) {
    if (unitsNamedBy(record, index).empty()) continue;
    const LeaseProbe noLease = [](const std::string&, const std::optional<LeaseFile>&) {
      return LeaseState::kMissing;
    };
    if (!holdsGpu(judge(record, runs, noLease))) continue;
    if (record.share) {
      // Two records of one share (a line written twice) are one share.
      if (std::find(held.shares.begin(), held.shares.end(), record.share->index) ==
          held.shares.end()) {
        held.shares.push_back(record.share->index);
      }
    } else {
      held.whole = true;
    }
  }
  return held;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 11) return 0;
  const std::size_t gpuCount = 1 + data[0] % 8;
  ShareRequest request;
  for (std::size_t i = 0; i < gpuCount; ++i) {
    request.gpus.push_back(std::to_string(i));
    const unsigned k = data[3 + i] % 9;
    if (k >= 1) request.shareable.push_back({std::to_string(i), k + 1, k % 3 == 0 ? "/run/a" : ""});
  }
  request.amount = 1 + data[1] % 4;
  request.placement = data[2] % 2 ? SharePlacement::kSpread : SharePlacement::kPack;
  request.owner = Owner{1001, 7};
  const std::string_view text(reinterpret_cast<const char*>(data) + 11, size - 11);
  const ParsedRecords before = parseRecords(text);

  const ShareAllocation shares = planShareAllocation(before, request, runs, {});
  if (shares.satisfied) {
    check(shares.granted.size() == request.amount);
    for (std::size_t i = 0; i < shares.granted.size(); ++i) {
      const GrantedShare& share = shares.granted[i];
      for (std::size_t j = 0; j < i; ++j) check(shares.granted[j].gpu != share.gpu);
      const Held was = heldOf(before.records, share.gpu);
      check(!was.whole);
      for (const unsigned index : was.shares) check(index != share.slot.index);
      check(share.slot.index < share.slot.count);
      const Held now = heldOf(shares.records, share.gpu);
      check(now.shares.size() <= share.slot.count);
    }
  } else {
    check(shares.granted.empty());
  }

  // A whole request after it, on what the share request left.
  AllocationRequest whole{request.gpus, std::size_t{1} + data[1] % 3, Owner{1003, 7}};
  ParsedRecords after;
  after.records = shares.records;
  const Allocation allocation = planAllocation(after, whole, runs);
  for (const std::string& gpu : allocation.granted) {
    check(heldOf(shares.records, gpu).shares.empty());
  }
  return 0;
}
