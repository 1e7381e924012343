// CUDA_VISIBLE_DEVICES as CUDA reads it (host/enumeration/VisibleDevices.h): the grammar, the
// resolution of each entry against a host's devices, and the units a worker may be handed under a
// mask.
#include "host/enumeration/VisibleDevices.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "TestSupport.h"

namespace flink::discovery::visible_devices_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr const char* kUuid0 = "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6";
constexpr const char* kUuid1 = "GPU-8932f000-0000-4000-8000-000000000001";
constexpr const char* kUuid2 = "GPU-1d2e3f40-1111-4222-8333-444455556666";
constexpr const char* kMigA = "MIG-0b6c1a2d-3e4f-5a6b-7c8d-9e0f1a2b3c4d";
constexpr const char* kMigB = "MIG-1c7d2b3e-4f5a-6b7c-8d9e-0f1a2b3c4d5e";

GpuDevice gpu(unsigned index, const std::string& uuid, const std::string& bus,
              const std::string& name = "NVIDIA H200") {
  GpuDevice device;
  device.identifier = std::to_string(index);
  device.uuid = uuid;
  device.pciBusId = bus;
  device.name = name;
  return device;
}

GpuDevice migInstance(unsigned parent, const std::string& uuid, unsigned gi, unsigned ci) {
  GpuDevice device;
  device.identifier = uuid;
  device.uuid = uuid;
  device.mig = MigPlacement{parent, gi, ci};
  return device;
}

/// Three H200s in PCI order; GPU 2 in MIG mode with two instances.
std::vector<GpuDevice> host() {
  std::vector<GpuDevice> devices{gpu(0, kUuid0, "00000000:19:00.0"),
                                 gpu(1, kUuid1, "00000000:3B:00.0"),
                                 gpu(2, kUuid2, "00000000:5D:00.0")};
  devices[2].migEnabled = true;
  devices.push_back(migInstance(2, kMigA, 9, 0));
  devices.push_back(migInstance(2, kMigB, 2, 1));
  return devices;
}

std::vector<std::string> entriesOf(const MaskResolution& resolution) {
  std::vector<std::string> entries;
  for (const VisibleDevice& visible : resolution.visible) entries.push_back(visible.entry);
  return entries;
}

std::vector<std::string> identifiersOfVisible(const MaskResolution& resolution) {
  std::vector<std::string> identifiers;
  for (const VisibleDevice& visible : resolution.visible) {
    identifiers.push_back(visible.device->identifier);
  }
  return identifiers;
}

MaskResolution resolve(const char* value, const std::vector<GpuDevice>& devices,
                       bool pciBusOrder = true) {
  return resolveVisibleDevices(*parseVisibleDevices(value), devices, pciBusOrder);
}

TEST(VisibleDevicesTest, UnsetMeansEveryDevice) {
  EXPECT_EQ(parseVisibleDevices(nullptr), std::nullopt);
  testing::ScopedEnvironment mask("CUDA_VISIBLE_DEVICES", std::nullopt);
  EXPECT_EQ(inheritedVisibleDevices(), std::nullopt);
}

TEST(VisibleDevicesTest, EmptyBlankAndNoDevFilesHideEveryDevice) {
  for (const char* value : {"", "  ", "NoDevFiles", " NoDevFiles "}) {
    const std::optional<VisibleDevicesMask> mask = parseVisibleDevices(value);
    ASSERT_TRUE(mask.has_value()) << value;
    EXPECT_TRUE(mask->hidesEveryDevice()) << value;
  }
}

TEST(VisibleDevicesTest, HidingEveryDeviceFailsNamingTheVariable) {
  try {
    unitsUnderMask(*parseVisibleDevices("NoDevFiles"), host(), false, true);
    FAIL() << "no DiscoveryError";
  } catch (const DiscoveryError& e) {
    EXPECT_THAT(e.what(), HasSubstr("CUDA_VISIBLE_DEVICES=NoDevFiles"));
    EXPECT_THAT(e.what(), HasSubstr("hides every GPU"));
  }
}

TEST(VisibleDevicesTest, EntriesAreTrimmedAndKeepTheirSpelling) {
  const std::optional<VisibleDevicesMask> mask = parseVisibleDevices(" 1 , GPU-8932f937 ,2");
  ASSERT_TRUE(mask.has_value());
  EXPECT_THAT(mask->entries, ElementsAre("1", "GPU-8932f937", "2"));
}

TEST(VisibleDevicesTest, IndicesCountWholeGpusInPciBusOrder) {
  // Listed out of PCI order: index 0 is the GPU on the lowest bus, whatever NVML called it.
  std::vector<GpuDevice> devices{gpu(0, kUuid0, "00000000:5D:00.0"),
                                 gpu(1, kUuid1, "00000000:19:00.0")};
  const MaskResolution resolution = resolve("0,1", devices);
  EXPECT_THAT(identifiersOfVisible(resolution), ElementsAre("1", "0"));
  EXPECT_THAT(resolution.warnings, IsEmpty());
}

TEST(VisibleDevicesTest, IndicesSkipGpusThatCannotBeOpened) {
  // NVML's GPU 0 is lost (left out of the enumeration): CUDA's device 0 is NVML's GPU 1.
  const std::vector<GpuDevice> devices{gpu(1, kUuid1, "00000000:3B:00.0"),
                                       gpu(2, kUuid2, "00000000:5D:00.0")};
  EXPECT_THAT(identifiersOfVisible(resolve("0", devices)), ElementsAre("1"));
}

TEST(VisibleDevicesTest, FullUuidsPrefixesAndCaseAreAccepted) {
  EXPECT_THAT(identifiersOfVisible(resolve(kUuid2, host())), ElementsAre("2"));
  EXPECT_THAT(identifiersOfVisible(resolve("gpu-1D2E3F40", host())), ElementsAre("2"));
  EXPECT_THAT(identifiersOfVisible(resolve(kMigB, host())), ElementsAre(kMigB));
  EXPECT_THAT(identifiersOfVisible(resolve("MIG-0b6c", host())), ElementsAre(kMigA));
}

TEST(VisibleDevicesTest, AnAmbiguousPrefixNamesNoDeviceAndSaysWhichItCouldMean) {
  // GPU 0 and GPU 1 both start with GPU-8932f: CUDA cannot tell which, and stops there.
  const std::vector<GpuDevice> devices = host();  // the resolution points into them
  const MaskResolution resolution = resolve("2,GPU-8932f,0", devices);
  EXPECT_THAT(identifiersOfVisible(resolution), ElementsAre("2"));
  ASSERT_EQ(resolution.warnings.size(), 1u);
  EXPECT_EQ(resolution.warnings[0].line(),
            std::string("warning: CUDA_VISIBLE_DEVICES=2,GPU-8932f,0: entry 'GPU-8932f' is "
                        "ambiguous: it could mean GPU 0 (") +
                kUuid0 + ") or GPU 1 (" + kUuid1 +
                "), so CUDA ignores it and every entry after it (0)");
  ASSERT_TRUE(resolution.stop.has_value());
  EXPECT_EQ(resolution.stop->entry, 1u);
  ASSERT_EQ(resolution.stop->ambiguous.size(), 2u);
  EXPECT_EQ(resolution.stop->ambiguous[0]->identifier, "0");
  EXPECT_EQ(resolution.stop->ambiguous[1]->identifier, "1");

  // Case aside, as CUDA compares; an entry that is no prefix at all still names no device.
  const MaskResolution upper = resolve("GPU-8932F", devices);
  EXPECT_THAT(identifiersOfVisible(upper), IsEmpty());
  ASSERT_EQ(upper.warnings.size(), 1u);
  EXPECT_THAT(upper.warnings[0].line(),
              HasSubstr("'GPU-8932F' is ambiguous: it could mean GPU 0 ("));
  const MaskResolution none = resolve("GPU-0000", devices);
  ASSERT_EQ(none.warnings.size(), 1u);
  EXPECT_THAT(none.warnings[0].line(), HasSubstr("'GPU-0000' names no device of this host"));
  ASSERT_TRUE(none.stop.has_value());
  EXPECT_THAT(none.stop->ambiguous, IsEmpty());
  // A prefix of one UUID only names its GPU.
  EXPECT_THAT(identifiersOfVisible(resolve("GPU-8932f9", devices)), ElementsAre("0"));
  EXPECT_FALSE(resolve("GPU-8932f9", devices).stop.has_value());
}

TEST(VisibleDevicesTest, AnAmbiguousMigPrefixAndOldMigFormSayWhichTheyCouldMean) {
  // Both instances of GPU 2 start with MIG-; the old form's GPU part is a prefix GPUs 0 and 1
  // share.
  const std::vector<GpuDevice> devices = host();
  const MaskResolution mig = resolve("MIG-", devices);  // "MIG-" alone names nothing
  EXPECT_THAT(mig.warnings[0].line(), HasSubstr("names no device"));
  std::vector<GpuDevice> twins = host();
  const std::string twin = "MIG-0b6c9999-0000-4000-8000-000000000000";
  twins[4].identifier = twin;
  twins[4].uuid = twin;
  const MaskResolution both = resolve("MIG-0b6c", twins);
  ASSERT_EQ(both.warnings.size(), 1u);
  EXPECT_EQ(both.warnings[0].line(),
            std::string("warning: CUDA_VISIBLE_DEVICES=MIG-0b6c: entry "
                        "'MIG-0b6c' is ambiguous: it could mean MIG instance ") +
                kMigA + " of GPU 2 or MIG instance " + twin + " of GPU 2, so CUDA ignores it");
  const MaskResolution old = resolve("MIG-GPU-8932f/9/0", devices);
  ASSERT_EQ(old.warnings.size(), 1u);
  EXPECT_THAT(old.warnings[0].line(),
              HasSubstr("'MIG-GPU-8932f/9/0' is ambiguous: it could mean GPU 0 (" +
                        std::string(kUuid0) + ") or GPU 1 ("));
}

TEST(VisibleDevicesTest, AMaskWhoseFirstEntryIsAmbiguousFailsSayingSo) {
  try {
    unitsUnderMask(*parseVisibleDevices("GPU-8932f,2"), host(), false, true);
    FAIL() << "no DiscoveryError";
  } catch (const DiscoveryError& e) {
    EXPECT_EQ(std::string(e.what()),
              std::string("CUDA_VISIBLE_DEVICES=GPU-8932f,2 names no GPU of this host that can be "
                          "handed out: its entry 'GPU-8932f' is ambiguous: it could mean GPU 0 (") +
                  kUuid0 + ") or GPU 1 (" + kUuid1 + ")");
    EXPECT_THAT(e.details(), ::testing::Contains(HasSubstr("every entry after it (2)")));
  }
}

TEST(VisibleDevicesTest, OldMigFormNamesTheInstanceByItsIds) {
  const std::string entry = std::string("MIG-") + kUuid2 + "/2/1";
  EXPECT_THAT(identifiersOfVisible(resolve(entry.c_str(), host())), ElementsAre(kMigB));
  const std::string wrong = std::string("MIG-") + kUuid2 + "/2/0";
  EXPECT_THAT(identifiersOfVisible(resolve(wrong.c_str(), host())), IsEmpty());
}

TEST(VisibleDevicesTest, StopsAtTheFirstEntryThatNamesNoDevice) {
  // CUDA's own example: 0,2,-1,1 makes 0 and 2 visible.
  const std::vector<GpuDevice> devices = host();
  const MaskResolution resolution = resolve("0,2,-1,1", devices);
  EXPECT_THAT(entriesOf(resolution), ElementsAre("0", "2"));
  ASSERT_EQ(resolution.warnings.size(), 1u);
  EXPECT_THAT(resolution.warnings[0].line(), HasSubstr("'-1' names no device"));
  // An index past the last GPU, and an empty entry, end the list too.
  EXPECT_THAT(entriesOf(resolve("1,7,0", host())), ElementsAre("1"));
  EXPECT_THAT(entriesOf(resolve("1,,0", host())), ElementsAre("1"));
}

TEST(VisibleDevicesTest, ADeviceNamedTwiceCountsOnceWithAWarning) {
  const std::string value = std::string("1,") + kUuid1 + ",1,0";
  const std::vector<GpuDevice> devices = host();
  const MaskResolution resolution = resolve(value.c_str(), devices);
  EXPECT_THAT(entriesOf(resolution), ElementsAre("1", "0"));
  ASSERT_EQ(resolution.warnings.size(), 2u);
  EXPECT_THAT(resolution.warnings[0].line(),
              HasSubstr("names the same device as '1'; counted once"));
}

TEST(VisibleDevicesTest, IndicesOnAMixedHostWithoutPciBusIdAreAmbiguous) {
  const std::vector<GpuDevice> mixed{gpu(0, kUuid0, "00000000:19:00.0", "NVIDIA A100"),
                                     gpu(1, kUuid1, "00000000:3B:00.0", "NVIDIA H200")};
  const MaskResolution ambiguous = resolve("1", mixed, false);
  EXPECT_THAT(identifiersOfVisible(ambiguous), ElementsAre("1"));  // read in PCI bus order
  ASSERT_EQ(ambiguous.warnings.size(), 1u);
  EXPECT_THAT(ambiguous.warnings[0].line(), HasSubstr("several GPU models"));
  EXPECT_THAT(ambiguous.warnings[0].line(), HasSubstr("CUDA_DEVICE_ORDER=PCI_BUS_ID"));
  // With PCI_BUS_ID, by UUID, or on a host of one model: no doubt.
  EXPECT_THAT(resolve("1", mixed, true).warnings, IsEmpty());
  EXPECT_THAT(resolve(kUuid1, mixed, false).warnings, IsEmpty());
  EXPECT_THAT(resolve("1", host(), false).warnings, IsEmpty());
}

TEST(VisibleDevicesTest, UnitsComeInMaskOrderNamedBothWays) {
  const MaskedUnits units = unitsUnderMask(*parseVisibleDevices("2, GPU-8932f937"), host(),
                                           /*mig=*/false, true);
  EXPECT_THAT(units.hostIdentifiers, ElementsAre("2", "0"));
  EXPECT_THAT(units.entries, ElementsAre("2", "GPU-8932f937"));
  EXPECT_EQ(units.entryOf("0"), "GPU-8932f937");
}

TEST(VisibleDevicesTest, UnitsFollowMigRules) {
  // Without --mig a MIG instance is no unit; with it, a GPU in MIG mode is none.
  const std::string value = std::string(kMigA) + ",2,0";
  const MaskedUnits whole =
      unitsUnderMask(*parseVisibleDevices(value.c_str()), host(), false, true);
  EXPECT_THAT(whole.hostIdentifiers, ElementsAre("2", "0"));
  ASSERT_EQ(whole.warnings.size(), 1u);
  EXPECT_THAT(whole.warnings[0].line(), HasSubstr("only with --mig"));

  const MaskedUnits mig = unitsUnderMask(*parseVisibleDevices(value.c_str()), host(), true, true);
  EXPECT_THAT(mig.hostIdentifiers, ElementsAre(kMigA, "0"));
  EXPECT_THAT(mig.entries, ElementsAre(kMigA, "0"));
}

TEST(VisibleDevicesTest, AMaskThatNamesNoUnitFailsNamingIt) {
  try {
    unitsUnderMask(*parseVisibleDevices("7"), host(), false, true);
    FAIL() << "no DiscoveryError";
  } catch (const DiscoveryError& e) {
    EXPECT_STREQ(e.what(),
                 "CUDA_VISIBLE_DEVICES=7 names no GPU of this host that can be handed out");
  }
}

}  // namespace
}  // namespace flink::discovery::visible_devices_test
