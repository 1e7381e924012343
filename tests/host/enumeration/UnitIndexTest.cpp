// The one index of a host's units: every spelling of a GPU names the one unit it is, in a record's
// reading (fail closed) and in an entry's (exactly one, or refused).
#include "host/enumeration/UnitIndex.h"

#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "host/enumeration/Vendor.h"

namespace flink::discovery::unit_index_test {
namespace {

constexpr const char* kUuid0 = "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6";
constexpr const char* kUuid1 = "GPU-8932f937-aaaa-4106-c12f-20bd9faed9f6";  // shares a prefix
constexpr const char* kMigA = "MIG-1c7d2b3e-4f5a-6b7c-8d9e-0f1a2b3c4d5e";
constexpr const char* kMigB = "MIG-2c7d2b3e-4f5a-6b7c-8d9e-0f1a2b3c4d5e";

GpuDevice gpu(const std::string& index, const char* uuid, const char* bus) {
  GpuDevice device;
  device.identifier = index;
  device.uuid = uuid;
  device.pciBusId = bus;
  return device;
}

GpuDevice instance(const char* uuid, unsigned parent, unsigned gi, unsigned ci) {
  GpuDevice device;
  device.identifier = uuid;
  device.uuid = uuid;
  device.mig = MigPlacement{parent, gi, ci};
  return device;
}

/// GPU 0 whole, GPU 1 in MIG mode with two instances.
UnitIndex host() {
  GpuDevice migGpu = gpu("1", kUuid1, "00000000:3B:00.0");
  migGpu.migEnabled = true;
  return UnitIndex::of({gpu("0", kUuid0, "00000000:19:00.0"), migGpu, instance(kMigA, 1, 1, 0),
                        instance(kMigB, 1, 2, 0)});
}

using Refs = std::vector<UnitRef>;

TEST(UnitIndexTest, EveryDeviceIsAUnitWithItsGpu) {
  const UnitIndex index = host();
  ASSERT_EQ(index.size(), 4u);
  EXPECT_EQ(index[0].id, "0");
  EXPECT_EQ(index[0].pciBusId, "00000000:19:00.0");
  EXPECT_EQ(index[2].id, kMigA);
  EXPECT_EQ(index[2].parent, 1u);
  EXPECT_EQ(index.gpuUuidOf(2), kUuid1);
  EXPECT_EQ(index.gpuUuidOf(0), kUuid0);
}

TEST(UnitIndexTest, ARecordNamesTheUnitOfItsUuidWhateverItsIndex) {
  const UnitIndex index = host();
  // Flink's records: by index, in any spelling of it.
  EXPECT_EQ(index.namedByRecord("0"), (Refs{0}));
  EXPECT_EQ(index.namedByRecord("00"), (Refs{0}));
  // A container numbers GPUs from 0: its record of GPU 0 with GPU 1's UUID is GPU 1 here.
  EXPECT_EQ(index.namedByRecord("0", std::string(kUuid1)), (Refs{1}));
  // A UUID in upper case, in the gpu field or beside an index.
  std::string upper = kUuid0;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_EQ(index.namedByRecord(upper), (Refs{0}));
  EXPECT_EQ(index.namedByRecord("7", upper), (Refs{0}));
  // A prefix that a worker without NVML recorded holds every GPU whose UUID begins so.
  EXPECT_EQ(index.namedByRecord("GPU-8932f937"), (Refs{0, 1}));
  EXPECT_EQ(index.namedByRecord("GPU-8932f937-d7"), (Refs{0}));
  // A UUID this host does not have, under an index whose GPU here has another: another GPU.
  EXPECT_TRUE(index.namedByRecord("0", std::string("GPU-ffffffff")).empty());
  EXPECT_TRUE(index.namedByRecord("GPU-ffffffff-0000").empty());
  EXPECT_TRUE(index.namedByRecord("9").empty());
  // A MIG instance's record names the instance alone, whatever GPU UUID is written beside it.
  EXPECT_EQ(index.namedByRecord(kMigA, std::string(kUuid1)), (Refs{2}));
  // The older MIG form names the instance of that GPU with those ids.
  EXPECT_EQ(index.namedByRecord(std::string("MIG-") + kUuid1 + "/2/0"), (Refs{3}));
  EXPECT_EQ(index.namedByRecord("MIG-GPU-8932f937-aaaa/1/0"), (Refs{2}));
}

TEST(UnitIndexTest, UnitsAddedLaterAreNamedByTheSamePrefixRules) {
  // As a reader adds the units only records name (HostView): a UUID prefix names every unit whose
  // UUID begins so and every unit known by a prefix of it, each once, ascending; a GPU's and a
  // MIG instance's UUIDs never name each other.
  UnitIndex index = host();
  const UnitRef prefix = index.add(Unit{"GPU-8932f9"});  // known by a prefix of its UUID
  const UnitRef other = index.add(Unit{"GPU-77aa"});
  const UnitRef mig = index.add(Unit{"MIG-8932f9"});
  const UnitRef again = index.add(Unit{"5", std::string(kUuid0)});  // GPU 0's UUID once more
  EXPECT_EQ(index.namedByRecord("GPU-8932f937"), (Refs{0, 1, prefix, again}));
  EXPECT_EQ(index.namedByRecord("GPU-8932f937-d7"), (Refs{0, prefix, again}));
  EXPECT_EQ(index.namedByRecord(kUuid0), (Refs{0}));             // exactly: the first of that UUID
  EXPECT_EQ(index.namedByRecord("GPU-8932F9"), (Refs{prefix}));  // its own UUID, exactly
  EXPECT_EQ(index.namedByRecord("MIG-8932f937aa"), (Refs{mig}));
  EXPECT_EQ(index.namedByRecord("GPU-77aa0000"), (Refs{other}));
  EXPECT_TRUE(index.namedByRecord("GPU-77ab").empty());
  EXPECT_EQ(index.entry("GPU-77").unit, other);
  EXPECT_EQ(index.entry("GPU-8932f937-d7").ambiguous, (Refs{0, again}));
}

TEST(UnitIndexTest, AnIndexWithoutAKnownUuidIsNamedByIndex) {
  // A host whose GPUs' UUIDs are not known (a --gpus list without NVML): the index decides.
  const UnitIndex index = UnitIndex::ofIdentifiers({"0", "1"}, {});
  EXPECT_EQ(index.namedByRecord("1", std::string(kUuid0)), (Refs{1}));
  // A unit listed by a UUID prefix is what a record of that GPU names.
  const UnitIndex listed = UnitIndex::ofIdentifiers({"GPU-8932f937"}, {});
  EXPECT_EQ(listed.namedByRecord("0", std::string(kUuid0)), (Refs{0}));
  EXPECT_EQ(listed.namedByRecord(kUuid1), (Refs{0}));
  EXPECT_TRUE(listed.namedByRecord("GPU-3a41").empty());
}

TEST(UnitIndexTest, AnEntryNamesExactlyOneUnitOrIsRefused) {
  const UnitIndex index = host();
  EXPECT_EQ(index.entry("01").unit, 1u);
  EXPECT_EQ(index.entry(kUuid0).unit, 0u);
  EXPECT_EQ(index.entry("GPU-8932f937-d7").unit, 0u);
  // A prefix of both GPUs' UUIDs is ambiguous, and says which.
  const EntryNaming both = index.entry("GPU-8932f937");
  EXPECT_FALSE(both.unit);
  EXPECT_EQ(both.ambiguous, (Refs{0, 1}));
  EXPECT_EQ(index.entry("MIG-1c7d").unit, 2u);
  EXPECT_EQ(index.entry(std::string("MIG-") + kUuid1 + "/1/0").unit, 2u);
  // A PCI bus id in the kernel's width and case names the whole GPU, never its instances.
  EXPECT_EQ(index.entry("0000:3b:00.0").unit, 1u);
  EXPECT_EQ(index.entry("00000000:19:00.0").unit, 0u);
  EXPECT_FALSE(index.entry("0000:5d:00.0").unit);
  EXPECT_FALSE(index.entry("7").unit);
  EXPECT_FALSE(index.entry("GPU-ffff").unit);
}

TEST(UnitIndexTest, VendorUnitsAreNamedByRecordNameAndTheirRuntimesIdentifier) {
  VendorHost vendor;
  vendor.vendor = Vendor::kIntel;
  vendor.units.push_back({"1.0", "intel:00000000:5A:00.0/0", {{"vendor", "intel"}}, "tile 0"});
  vendor.units.push_back({"0",
                          "amd:00000000:63:00.0",
                          {{"vendor", "amd"}, {"uuid", "GPU-51276ac1b2c3d4e5"}},
                          "GPU 0"});
  vendor.related = {{"intel:00000000:5A:00.0", {"intel:00000000:5A:00.0/0"}}};
  const UnitIndex index = UnitIndex::of(vendor);
  // The card that shares the tile's hardware is a unit too, though not one to hand out here.
  ASSERT_TRUE(index.find("intel:00000000:5A:00.0"));
  EXPECT_EQ(index.namedByRecord("intel:0000:5a:00.0/0"), (Refs{0}));
  EXPECT_EQ(index.entry("1.0").unit, 0u);
  EXPECT_EQ(index.entry("GPU-51276AC1").unit, 1u);
  // An NVIDIA record by index or UUID never names an AMD or Intel unit.
  EXPECT_TRUE(index.namedByRecord("0").empty());
  EXPECT_TRUE(index.namedByRecord("GPU-51276ac1").empty());
}

TEST(UnitIndexTest, OneUnitIsNamedByTheSameRule) {
  EXPECT_TRUE(namesUnit("01", std::nullopt, "1", std::nullopt));
  EXPECT_FALSE(namesUnit("1", std::string(kUuid1), "1", std::string(kUuid0)));
  EXPECT_TRUE(namesUnit("0", std::string(kUuid0), "3", std::string(kUuid0)));
  EXPECT_FALSE(namesUnit(kMigA, std::string(kUuid1), "1", std::string(kUuid1)));
}

TEST(UnitIndexTest, PciBusIdsAreReadInEitherWidthAndCase) {
  EXPECT_EQ(canonicalPciBusId("0000:3b:00.0"), "00000000:3B:00.0");
  EXPECT_EQ(canonicalPciBusId("00000000:3B:00.7"), "00000000:3B:00.7");
  EXPECT_FALSE(canonicalPciBusId("0000:3b:00.8"));
  EXPECT_FALSE(canonicalPciBusId("3b:00.0"));
  EXPECT_FALSE(canonicalPciBusId("GPU-3b"));
}

// --- presence: state that outlived its GPU ---------------------------------------------------

/// The host() above as the host's whole enumeration by NVML.
HostCoverage whole() {
  HostCoverage coverage;
  coverage.cannotTell.clear();
  coverage.migListed = true;
  return coverage;
}

TEST(UnitIndexTest, PresenceTellsWhatTheHostHasFromWhatItNoLongerHas) {
  const UnitIndex index = host();
  const HostCoverage coverage = whole();
  const auto presence = [&](std::string_view gpu, std::optional<std::string> uuid = {}) {
    return index.presence(gpu, uuid, coverage);
  };
  // By index: GPUs 0 and 1 are here, in any spelling; 2 and 11 are past the count.
  EXPECT_EQ(presence("0"), Presence::kKnown);
  EXPECT_EQ(presence("01"), Presence::kKnown);
  EXPECT_EQ(presence("2"), Presence::kNotOnThisHost);
  EXPECT_EQ(presence("11"), Presence::kNotOnThisHost);
  // By UUID, in either case, or a prefix: the UUID decides, whatever the index (a container's).
  EXPECT_EQ(presence(kUuid0), Presence::kKnown);
  EXPECT_EQ(presence("GPU-8932F937-D72C-4106-C12F-20BD9FAED9F6"), Presence::kKnown);
  EXPECT_EQ(presence("GPU-8932f937"), Presence::kKnown);
  EXPECT_EQ(presence("7", kUuid0), Presence::kKnown);
  EXPECT_EQ(presence("GPU-00000000-0000-4000-8000-000000000000"), Presence::kNotOnThisHost);
  // A board replaced: GPU 0 is here, with another UUID than the record's.
  EXPECT_EQ(presence("0", std::string("GPU-00000000-0000-4000-8000-000000000000")),
            Presence::kNotOnThisHost);
  // MIG instances: those of the layout now, by UUID or the older name; another layout's not.
  EXPECT_EQ(presence(kMigA), Presence::kKnown);
  EXPECT_EQ(presence(kMigB, std::string(kUuid1)), Presence::kKnown);
  EXPECT_EQ(presence(std::string("MIG-GPU-") + std::string(kUuid1).substr(4) + "/2/0"),
            Presence::kKnown);
  EXPECT_EQ(presence("MIG-3c7d2b3e-4f5a-6b7c-8d9e-0f1a2b3c4d5e"), Presence::kNotOnThisHost);
  EXPECT_EQ(presence(std::string("MIG-GPU-") + std::string(kUuid1).substr(4) + "/3/0"),
            Presence::kNotOnThisHost);
  // Not NVIDIA's: never judged here.
  EXPECT_EQ(presence("amd:00000000:05:00.3"), Presence::kCannotTell);
  EXPECT_EQ(presence("1.0"), Presence::kCannotTell);
}

TEST(UnitIndexTest, PresenceCannotTellWithoutTheHostsWholeList) {
  const UnitIndex index = host();
  HostCoverage partial;  // NVML not usable, a --gpus list, a mask: its default says so
  EXPECT_FALSE(partial.whole());
  for (const std::string gpu : {"0", "2", "GPU-00000000-0000-4000-8000-000000000000",
                                "MIG-3c7d2b3e-4f5a-6b7c-8d9e-0f1a2b3c4d5e"}) {
    EXPECT_EQ(index.presence(gpu, std::nullopt, partial), Presence::kCannotTell) << gpu;
  }
  // nvidia-smi without its MIG listing: no MIG record is judged, the GPUs still are.
  HostCoverage noMig = whole();
  noMig.migListed = false;
  EXPECT_EQ(index.presence("MIG-3c7d2b3e-4f5a-6b7c-8d9e-0f1a2b3c4d5e", std::nullopt, noMig),
            Presence::kCannotTell);
  EXPECT_EQ(index.presence("2", std::nullopt, noMig), Presence::kNotOnThisHost);
}

TEST(UnitIndexTest, CoverageIsWholeOnlyForAnUnmaskedListWithEveryUuid) {
  Enumeration found;
  found.devices = {gpu("0", kUuid0, "00000000:19:00.0")};
  ::unsetenv("CUDA_VISIBLE_DEVICES");
  ::unsetenv("NVIDIA_VISIBLE_DEVICES");
  EXPECT_TRUE(coverageOf(found, true).whole());
  EXPECT_TRUE(coverageOf(found, true).migListed);
  ::setenv("NVIDIA_VISIBLE_DEVICES", "all", 1);
  EXPECT_TRUE(coverageOf(found, true).whole());
  ::setenv("NVIDIA_VISIBLE_DEVICES", "GPU-8932f937", 1);
  EXPECT_NE(coverageOf(found, true).cannotTell.find("NVIDIA_VISIBLE_DEVICES"), std::string::npos);
  ::unsetenv("NVIDIA_VISIBLE_DEVICES");
  ::setenv("CUDA_VISIBLE_DEVICES", "", 1);  // set, even empty: a mask
  EXPECT_NE(coverageOf(found, true).cannotTell.find("CUDA_VISIBLE_DEVICES="), std::string::npos);
  ::unsetenv("CUDA_VISIBLE_DEVICES");
  Enumeration lost = found;
  lost.leftOut.push_back({"GPU 1", "GPU is lost"});
  EXPECT_FALSE(coverageOf(lost, true).whole());
  Enumeration noUuid = found;
  noUuid.devices.front().uuid.reset();
  EXPECT_FALSE(coverageOf(noUuid, true).whole());
  EXPECT_FALSE(coverageOf(Enumeration{}, true).whole());
}

}  // namespace
}  // namespace flink::discovery::unit_index_test
