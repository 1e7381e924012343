// findAmdUnits against stand-in hosts (FakeAmdHost.h): KFD order, usable units, partitions, the
// properties, the masks, what exec sets, the errors of bad input, and the tools as a fallback.
#include "host/amd/AmdGpus.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "FakeAmdHost.h"
#include "host/enumeration/GpuEnumerator.h"
#include "util/FileOwnership.h"

namespace flink::amd {
namespace {

using discovery::DiscoveryError;
using discovery::Properties;
using discovery::VendorHost;
using discovery::VendorUnit;
using ::testing::AllOf;
using ::testing::ElementsAre;
using testing::FakeAmdHost;
using testing::FakeGpu;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
namespace fs = std::filesystem;
using Environment = std::vector<std::pair<std::string, std::string>>;

std::vector<std::string> identifiers(const VendorHost& host) {
  std::vector<std::string> result;
  for (const VendorUnit& unit : host.units) result.push_back(unit.identifier);
  return result;
}

std::vector<std::string> records(const VendorHost& host) {
  std::vector<std::string> result;
  for (const VendorUnit& unit : host.units) result.push_back(unit.recordName);
  return result;
}

DiscoveryError failure(const FakeAmdHost& host) {
  try {
    findAmdUnits(host.options());
  } catch (const DiscoveryError& e) {
    return e;
  }
  ADD_FAILURE() << "findAmdUnits did not throw";
  return DiscoveryError("none");
}

std::string joined(const std::vector<std::string>& lines) {
  std::string text;
  for (const std::string& line : lines) text += line + "\n";
  return text;
}

Environment environmentOf(const VendorHost& host, const std::vector<std::size_t>& granted,
                          bool uuids = false) {
  std::vector<const VendorUnit*> units;
  for (std::size_t i : granted) units.push_back(&host.units.at(i));
  return host.environmentFor(units, uuids);
}

const std::vector<std::string> kMi210Records{
    "amd:00000000:63:00.0", "amd:00000000:43:00.0", "amd:00000000:03:00.0", "amd:00000000:26:00.0",
    "amd:00000000:E3:00.0", "amd:00000000:C3:00.0", "amd:00000000:83:00.0", "amd:00000000:A3:00.0"};

// --- Section 2: what a GPU is, its index ---

TEST(AmdGpus, Mi210IndexFollowsKfdNodeOrderNotPciOrder) {
  FakeAmdHost fake;
  fake.mi210Host();
  const VendorHost host = findAmdUnits(fake.options());
  EXPECT_EQ(host.vendor, discovery::Vendor::kAmd);
  EXPECT_THAT(identifiers(host), ElementsAre("0", "1", "2", "3", "4", "5", "6", "7"));
  EXPECT_EQ(records(host), kMi210Records);
  EXPECT_EQ(host.units[0].description, "GPU 0 (00000000:63:00.0)");
  EXPECT_EQ(host.units[2].description, "GPU 2 (00000000:03:00.0)");
  EXPECT_THAT(linesOf(host.notices), IsEmpty());
  EXPECT_THAT(host.related, IsEmpty());
  EXPECT_EQ(host.mask, std::nullopt);
}

TEST(AmdGpus, Mi210PropertiesInNvidiasForms) {
  FakeAmdHost fake;
  fake.mi210Host();
  const VendorHost host = findAmdUnits(fake.options());
  EXPECT_EQ(host.units[0].properties, (Properties{{"vendor", "amd"},
                                                  {"uuid", "GPU-1901ead3a2ecd4a6"},
                                                  {"pci.bus_id", "00000000:63:00.0"},
                                                  {"pci.device_id", "0x740f"},
                                                  {"name", "AMD Instinct MI210"},
                                                  {"memory.total", "65520"},
                                                  {"render_minor", "128"},
                                                  {"numa_node", "0"},
                                                  {"cpu_affinity", "0-63"}}));
  // No PCI device folder in sysfs for this one: no name, NUMA node or CPUs, nothing made up.
  EXPECT_EQ(host.units[2].properties, (Properties{{"vendor", "amd"},
                                                  {"uuid", "GPU-93bb3629c01aea1c"},
                                                  {"pci.bus_id", "00000000:03:00.0"},
                                                  {"pci.device_id", "0x740f"},
                                                  {"memory.total", "65520"},
                                                  {"render_minor", "130"}}));
}

TEST(AmdGpus, NodeTenComesAfterNodeNine) {
  FakeAmdHost fake;
  fake.cpu(0);
  for (unsigned node = 1; node <= 11; ++node) {
    FakeGpu gpu;
    gpu.node = node;
    gpu.locationId = (0x10 + node) << 8;
    gpu.renderMinor = 127 + node;
    fake.gpu(gpu);
  }
  const VendorHost host = findAmdUnits(fake.options());
  ASSERT_EQ(host.units.size(), 11U);
  EXPECT_EQ(host.units[8].recordName, "amd:00000000:19:00.0");   // node 9
  EXPECT_EQ(host.units[9].recordName, "amd:00000000:1A:00.0");   // node 10
  EXPECT_EQ(host.units[10].recordName, "amd:00000000:1B:00.0");  // node 11
  EXPECT_EQ(host.units[10].identifier, "10");
}

TEST(AmdGpus, ContainerGivenSomeRenderNodesCountsOnlyThose) {
  FakeAmdHost fake;
  fake.mi210Host();
  for (unsigned minor = 128; minor <= 135; ++minor) {
    if (minor != 130 && minor != 133) fs::remove(fake.render(minor));
  }
  const VendorHost host = findAmdUnits(fake.options());
  EXPECT_THAT(identifiers(host), ElementsAre("0", "1"));
  EXPECT_THAT(records(host), ElementsAre("amd:00000000:03:00.0", "amd:00000000:C3:00.0"));
  EXPECT_EQ(host.units[1].description, "GPU 1 (00000000:C3:00.0)");
  // The normal container case: a note, not a warning.
  ASSERT_EQ(linesOf(host.notices).size(), 6U);
  EXPECT_EQ(linesOf(host.notices)[0],
            "note: GPU 00000000:63:00.0 (KFD node 2) is left out: " +
                (fake.dev() / "dri/renderD128").string() +
                " does not exist in this process (a container given other "
                "GPUs); ROCm does not count it");
  for (const Notice& notice : host.notices) {
    EXPECT_EQ(notice.kind, Notice::Kind::kNote) << notice.line();
  }
}

TEST(AmdGpus, RenderNodeDeniedByDeviceCgroupIsNotCounted) {
  FakeAmdHost fake;
  fake.mi210Host();
  fake.denyWith(fake.render(128), EPERM);
  const VendorHost host = findAmdUnits(fake.options());
  EXPECT_THAT(identifiers(host), ElementsAre("0", "1", "2", "3", "4", "5", "6"));
  EXPECT_EQ(host.units[0].recordName, "amd:00000000:43:00.0");
  ASSERT_EQ(linesOf(host.notices).size(), 1U);
  EXPECT_EQ(linesOf(host.notices)[0],
            "note: GPU 00000000:63:00.0 (KFD node 2) is left out: opening " +
                fake.render(128).string() +
                " is not permitted (EPERM: a device cgroup denies it); ROCm "
                "does not count it");
}

TEST(AmdGpus, RenderNodeFailingWithAnotherErrnoIsAWarning) {
  FakeAmdHost fake;
  fake.mi210Host();
  fake.denyWith(fake.render(129), EIO);
  const VendorHost host = findAmdUnits(fake.options());
  EXPECT_EQ(host.units.size(), 7U);
  EXPECT_EQ(host.units[1].recordName, "amd:00000000:03:00.0");
  ASSERT_EQ(linesOf(host.notices).size(), 1U);
  EXPECT_EQ(linesOf(host.notices)[0],
            "warning: GPU 00000000:43:00.0 (KFD node 3) is left out: cannot "
            "open " +
                fake.render(129).string() + ": " + std::strerror(EIO) + "; ROCm does not count it");
  // Not the normal container case: a fault of the host, which a driver logs as an error.
  EXPECT_EQ(host.notices[0].kind, Notice::Kind::kGpuLeftOut);
}

// --- Section 3: partitions and the properties ---

void expectCpxPartitions(bool interim) {
  FakeAmdHost fake;
  fake.mi300xCpxHost(interim);
  const VendorHost host = findAmdUnits(fake.options());
  EXPECT_THAT(identifiers(host), ElementsAre("0", "1", "2", "3", "4", "5", "6", "7"));
  EXPECT_THAT(records(host),
              ElementsAre("amd:00000000:05:00.0", "amd:00000000:05:00.1", "amd:00000000:05:00.2",
                          "amd:00000000:05:00.3", "amd:00000000:05:00.4", "amd:00000000:05:00.5",
                          "amd:00000000:05:00.6", "amd:00000000:05:00.7"));
  EXPECT_EQ(host.units[3].description, "partition 3 of GPU 00000000:05:00.0");
  // NUMA data and the name come from the real function .0.
  EXPECT_EQ(host.units[3].properties, (Properties{{"vendor", "amd"},
                                                  {"uuid", "GPU-4b3c2d1e0f102030"},
                                                  {"pci.bus_id", "00000000:05:00.3"},
                                                  {"pci.device_id", "0x74a1"},
                                                  {"name", "AMD Instinct MI300X"},
                                                  {"memory.total", "24576"},
                                                  {"render_minor", "131"},
                                                  {"numa_node", "0"},
                                                  {"cpu_affinity", "0-47,96-143"},
                                                  {"partition.id", "3"},
                                                  {"partition.mode", "CPX"}}));
  EXPECT_THAT(host.related, IsEmpty());
}

TEST(AmdGpus, Mi300xCpxPartitionsCarryTheirNumberAsFunction) { expectCpxPartitions(false); }

TEST(AmdGpus, Mi300xCpxPartitionsOfInterimKernelsInBits28To31) { expectCpxPartitions(true); }

TEST(AmdGpus, MemoryFromLocalMemSizeWithoutFrameBufferBanks) {
  FakeAmdHost fake;
  FakeGpu withLocal;
  withLocal.node = 1;
  withLocal.locationId = 0x0300;
  withLocal.renderMinor = 128;
  withLocal.heapType = 0;  // system memory: not the GPU's
  withLocal.bankBytes = 1ULL << 40;
  withLocal.localMemSize = 17163091968ULL;
  FakeGpu withNone = withLocal;
  withNone.node = 2;
  withNone.locationId = 0x0400;
  withNone.renderMinor = 129;
  withNone.memBanks = false;
  withNone.localMemSize = 0;
  fake.cpu(0);
  fake.gpu(withLocal);
  fake.gpu(withNone);
  const VendorHost host = findAmdUnits(fake.options());
  EXPECT_EQ(discovery::propertyOf(host.units[0].properties, "memory.total"), "16368");
  EXPECT_EQ(discovery::propertyOf(host.units[1].properties, "memory.total"), std::nullopt);
}

TEST(AmdGpus, DomainUuidAndNumaAbsentWhenUnknown) {
  FakeAmdHost fake;
  FakeGpu old;
  old.node = 1;
  old.locationId = 0x4109;  // bus 41, device 1, function 1
  old.renderMinor = 128;
  old.domain = std::nullopt;  // older kernels write none: domain 0
  FakeGpu second;
  second.node = 2;
  second.locationId = 0x4100;
  second.domain = 2;
  second.renderMinor = 129;
  second.uniqueId = 0xabc;
  fake.cpu(0);
  fake.gpu(old);
  fake.gpu(second);
  fake.pciDevice("0000:41:01.1", "", "-1", "");
  const VendorHost host = findAmdUnits(fake.options());
  EXPECT_EQ(host.units[0].recordName, "amd:00000000:41:01.1");
  EXPECT_EQ(host.units[0].properties, (Properties{{"vendor", "amd"},
                                                  {"pci.bus_id", "00000000:41:01.1"},
                                                  {"pci.device_id", "0x740f"},
                                                  {"memory.total", "65520"},
                                                  {"render_minor", "128"}}));
  EXPECT_EQ(host.units[1].recordName, "amd:00000002:41:00.0");
  EXPECT_EQ(discovery::propertyOf(host.units[1].properties, "uuid"), "GPU-0000000000000abc");
}

// --- Section 8: bad input ---

TEST(AmdGpus, MissingKfdFailsSuggestingTheDevice) {
  FakeAmdHost fake;
  fake.mi210Host();
  fs::remove(fake.dev() / "kfd");
  const DiscoveryError e = failure(fake);
  EXPECT_THAT(e.what(), AllOf(HasSubstr("no kfd"), HasSubstr((fake.dev() / "kfd").string())));
  EXPECT_THAT(joined(e.details()), HasSubstr("--device /dev/kfd"));
}

TEST(AmdGpus, KfdThisUserMayNotOpenFailsWithOwnerGroupModeAndFix) {
  FakeAmdHost fake;
  fake.mi210Host();
  fs::permissions(fake.dev() / "kfd", fs::perms::owner_read | fs::perms::owner_write |
                                          fs::perms::group_read | fs::perms::group_write);
  fake.denyWith(fake.dev() / "kfd", EACCES);
  const DiscoveryError e = failure(fake);
  struct stat kfd {};
  ASSERT_EQ(::stat((fake.dev() / "kfd").c_str(), &kfd), 0);
  const std::string group = files::lookupGroupName(kfd.st_gid).value_or(std::to_string(kfd.st_gid));
  EXPECT_THAT(e.what(),
              AllOf(HasSubstr("permission denied opening " + (fake.dev() / "kfd").string()),
                    HasSubstr("group " + group), HasSubstr("mode 0660")));
  EXPECT_THAT(joined(e.details()), HasSubstr("usermod -aG " + group + " "));
}

TEST(AmdGpus, RenderNodeThisUserMayNotOpenFails) {
  FakeAmdHost fake;
  fake.mi210Host();
  fake.denyWith(fake.render(131), EACCES);
  const DiscoveryError e = failure(fake);
  EXPECT_THAT(e.what(), AllOf(HasSubstr("permission denied opening " + fake.render(131).string()),
                              HasSubstr("owner "), HasSubstr("mode ")));
  EXPECT_THAT(joined(e.details()), HasSubstr("usermod -aG "));
}

TEST(AmdGpus, NodeWithoutRenderNodeIsLeftOutWithAWarning) {
  FakeAmdHost fake;
  fake.cpu(0);
  for (unsigned node = 1; node <= 3; ++node) {
    FakeGpu gpu;
    gpu.node = node == 3 ? 7 : node;
    gpu.locationId = (0x20 + node) << 8;
    gpu.renderMinor = node == 2 ? 0 : 127 + node;
    fake.gpu(gpu);
  }
  const VendorHost host = findAmdUnits(fake.options());
  EXPECT_THAT(records(host), ElementsAre("amd:00000000:21:00.0", "amd:00000000:23:00.0"));
  EXPECT_THAT(identifiers(host), ElementsAre("0", "1"));
  FakeAmdHost seven;
  seven.cpu(0);
  FakeGpu gpu;
  gpu.node = 7;
  gpu.locationId = 0x6300;
  gpu.renderMinor = 0;
  seven.gpu(gpu);
  gpu.node = 8;
  gpu.locationId = 0x6400;
  gpu.renderMinor = 129;
  seven.gpu(gpu);
  const VendorHost other = findAmdUnits(seven.options());
  ASSERT_EQ(linesOf(other.notices).size(), 1U);
  EXPECT_THAT(linesOf(other.notices)[0],
              AllOf(HasSubstr("warning: KFD node 7 (GPU 00000000:63:00.0) has no render node")));
  EXPECT_EQ(other.units[0].identifier, "0");
}

TEST(AmdGpus, MalformedPropertiesLineFailsNamingFileAndLine) {
  FakeAmdHost fake;
  fake.mi210Host();
  const fs::path file = fake.nodes() / "5/properties";
  FakeAmdHost::write(file, "cpu_cores_count 0\nsimd_count 416\nlocation_id 0x2600\n");
  const DiscoveryError e = failure(fake);
  EXPECT_THAT(e.what(), AllOf(HasSubstr(file.string()), HasSubstr("line 3"),
                              HasSubstr("'location_id 0x2600'")));
}

TEST(AmdGpus, PropertiesWithoutARequiredLineFailNamingIt) {
  for (const std::string missing : {"simd_count", "location_id", "drm_render_minor"}) {
    FakeAmdHost fake;
    fake.mi210Host();
    const fs::path file = fake.nodes() / "3/properties";
    std::string text = FakeAmdHost::propertiesOf(testing::gpuAt(3, 17152, 129));
    const std::size_t at = text.find(missing + " ");
    text.erase(at, text.find('\n', at) - at + 1);
    FakeAmdHost::write(file, text);
    const DiscoveryError e = failure(fake);
    EXPECT_THAT(e.what(), AllOf(HasSubstr(file.string()), HasSubstr("no '" + missing + "' line")))
        << missing;
  }
}

TEST(AmdGpus, CpuOnlyTopologyHasNoAmdGpu) {
  FakeAmdHost fake;
  fake.cpu(0);
  fake.cpu(1);
  const DiscoveryError e = failure(fake);
  EXPECT_THAT(e.what(), HasSubstr("no AMD GPU on this host: the KFD topology at " +
                                  fake.nodes().string() + " lists CPU nodes only"));
  EXPECT_EQ(e.kind(), DiscoveryError::Kind::kNoGpu);
  FakeAmdHost empty;
  EXPECT_THAT(failure(empty).what(), HasSubstr("no AMD GPU on this host"));
}

TEST(AmdGpus, NothingUsableNamesEachUnitLeftOut) {
  FakeAmdHost fake;
  fake.cpu(0);
  FakeGpu gpu = testing::gpuAt(1, 0x6300, 128);
  gpu.renderNode = false;
  fake.gpu(gpu);
  fake.gpu(testing::gpuAt(2, 0x4300, 0));
  fake.gpu(testing::gpuAt(3, 0x0300, 130));
  fake.denyWith(fake.render(130), EPERM);
  const DiscoveryError e = failure(fake);
  EXPECT_THAT(e.what(), HasSubstr("no AMD GPU that this process can use"));
  EXPECT_EQ(e.kind(), DiscoveryError::Kind::kNoUsableGpu);
  ASSERT_EQ(e.details().size(), 3U);
  EXPECT_THAT(e.details()[0],
              AllOf(HasSubstr("GPU 00000000:63:00.0"), HasSubstr("does not exist")));
  EXPECT_THAT(e.details()[1], AllOf(HasSubstr("KFD node 2"), HasSubstr("no render node")));
  EXPECT_THAT(e.details()[2], AllOf(HasSubstr("GPU 00000000:03:00.0"), HasSubstr("EPERM")));
}

// --- Section 4: ROCR_VISIBLE_DEVICES ---

TEST(AmdGpus, RocrEmptyHidesEveryGpu) {
  FakeAmdHost fake;
  fake.mi210Host();
  fake.setenv("ROCR_VISIBLE_DEVICES", "");
  EXPECT_THAT(failure(fake).what(),
              AllOf(HasSubstr("ROCR_VISIBLE_DEVICES=''"), HasSubstr("leaves no AMD GPU")));
}

TEST(AmdGpus, RocrIndicesAsStrtolReadsThemPrintedAsSpelled) {
  FakeAmdHost fake;
  fake.mi210Host();
  fake.setenv("ROCR_VISIBLE_DEVICES", " 0x1, 3,07 ");
  const VendorHost host = findAmdUnits(fake.options());
  EXPECT_THAT(identifiers(host), ElementsAre("0x1", "3", "07"));
  EXPECT_THAT(records(host),
              ElementsAre("amd:00000000:43:00.0", "amd:00000000:26:00.0", "amd:00000000:A3:00.0"));
  EXPECT_THAT(linesOf(host.notices), IsEmpty());
}

TEST(AmdGpus, RocrLeadingZeroIsOctalAsStrtolBaseZeroReadsIt) {
  FakeAmdHost fake;
  fake.cpu(0);
  for (unsigned node = 1; node <= 11; ++node) {
    fake.gpu(testing::gpuAt(node, (0x10 + node) << 8, 127 + node));
  }
  fake.setenv("ROCR_VISIBLE_DEVICES", "010");
  const VendorHost host = findAmdUnits(fake.options());
  // Index 8 (node 9), not 10.
  EXPECT_THAT(records(host), ElementsAre("amd:00000000:19:00.0"));
  EXPECT_THAT(identifiers(host), ElementsAre("010"));
}

TEST(AmdGpus, RocrOctalEntryEndsTheListWhenPastTheUnits) {
  FakeAmdHost fake;
  fake.mi210Host();
  fake.setenv("ROCR_VISIBLE_DEVICES", "0x1,010,2");
  const VendorHost host = findAmdUnits(fake.options());
  EXPECT_THAT(identifiers(host), ElementsAre("0x1"));
  EXPECT_EQ(host.mask, "ROCR_VISIBLE_DEVICES=0x1,010,2");
  ASSERT_EQ(linesOf(host.notices).size(), 1U);
  EXPECT_THAT(
      linesOf(host.notices)[0],
      AllOf(HasSubstr("ROCR_VISIBLE_DEVICES='0x1,010,2': '010' (entry 2) names no usable GPU"),
            HasSubstr("so ROCr ignores that entry and every entry after it")));
}

TEST(AmdGpus, RocrUuidsFullAndUniquePrefixKeepTheirCase) {
  FakeAmdHost fake;
  fake.mi210Host();
  fake.setenv("ROCR_VISIBLE_DEVICES", "GPU-93BB3629C01AEA1C,gpu-c34e,GPU-1");
  const VendorHost host = findAmdUnits(fake.options());
  // "gpu-c34e" is 8 characters and names one GPU; "GPU-1" is 5 and names one too.
  EXPECT_THAT(identifiers(host), ElementsAre("GPU-93BB3629C01AEA1C", "gpu-c34e", "GPU-1"));
  EXPECT_THAT(records(host),
              ElementsAre("amd:00000000:03:00.0", "amd:00000000:A3:00.0", "amd:00000000:63:00.0"));
}

TEST(AmdGpus, RocrTooShortOrAmbiguousPrefixEndsTheList) {
  FakeAmdHost fake;
  fake.mi210Host();
  fake.setenv("ROCR_VISIBLE_DEVICES", "1,GPU-a,2");  // GPU-a names GPU-aea8… and GPU-a378…
  const VendorHost boards = findAmdUnits(fake.options());
  EXPECT_THAT(identifiers(boards), ElementsAre("1"));
  // Two boards, not the partitions of one GPU.
  EXPECT_THAT(linesOf(boards.notices),
              ElementsAre("warning: ROCR_VISIBLE_DEVICES='1,GPU-a,2': 'GPU-a' (entry 2) matches 2 "
                          "GPUs, so ROCr ignores that entry and every entry after it"));
  fake.setenv("ROCR_VISIBLE_DEVICES", "1,GPU-,2");
  EXPECT_THAT(identifiers(findAmdUnits(fake.options())), ElementsAre("1"));
}

TEST(AmdGpus, RocrUuidOfPartitionsNamesSeveralAndEndsTheList) {
  FakeAmdHost fake;
  fake.mi300xCpxHost(false);
  fake.setenv("ROCR_VISIBLE_DEVICES", "5,GPU-4b3c2d1e0f102030,1");
  const VendorHost host = findAmdUnits(fake.options());
  EXPECT_THAT(identifiers(host), ElementsAre("5"));
  EXPECT_THAT(records(host), ElementsAre("amd:00000000:05:00.5"));
  ASSERT_EQ(linesOf(host.notices).size(), 1U);
  EXPECT_EQ(linesOf(host.notices)[0],
            "warning: ROCR_VISIBLE_DEVICES='5,GPU-4b3c2d1e0f102030,1': 'GPU-4b3c2d1e0f102030' "
            "(entry 2) names 8 units (the partitions of one GPU share its UUID), so ROCr ignores "
            "that entry and every entry after it");
}

TEST(AmdGpus, RocrDuplicateAndUnknownEntriesEndTheList) {
  FakeAmdHost fake;
  fake.mi210Host();
  fake.setenv("ROCR_VISIBLE_DEVICES", "1,2,0x2,3");
  EXPECT_THAT(identifiers(findAmdUnits(fake.options())), ElementsAre("1", "2"));
  fake.setenv("ROCR_VISIBLE_DEVICES", "1,8,3");
  EXPECT_THAT(identifiers(findAmdUnits(fake.options())), ElementsAre("1"));
  fake.setenv("ROCR_VISIBLE_DEVICES", "GPU-ffffffffffffffff,1");
  EXPECT_THAT(failure(fake).what(), HasSubstr("leaves no AMD GPU"));
}

TEST(AmdGpus, RocrIndicesCountOnlyTheUnitsThisProcessCanOpen) {
  FakeAmdHost fake;
  fake.mi210Host();
  fs::remove(fake.render(128));
  fs::remove(fake.render(129));
  fake.setenv("ROCR_VISIBLE_DEVICES", "1");
  const VendorHost host = findAmdUnits(fake.options());
  EXPECT_THAT(records(host), ElementsAre("amd:00000000:26:00.0"));
}

// --- Section 4: the HIP layer ---

TEST(AmdGpus, HipIndexesWhatRocrLeft) {
  FakeAmdHost fake;
  fake.mi210Host();
  fake.setenv("ROCR_VISIBLE_DEVICES", "3,5,7");
  fake.setenv("HIP_VISIBLE_DEVICES", "2,0");
  const VendorHost host = findAmdUnits(fake.options());
  EXPECT_THAT(identifiers(host), ElementsAre("2", "0"));
  EXPECT_THAT(records(host), ElementsAre("amd:00000000:A3:00.0", "amd:00000000:26:00.0"));
  EXPECT_EQ(host.mask, "HIP_VISIBLE_DEVICES=2,0");
  // Messages name a GPU by what is printed for it.
  EXPECT_EQ(host.units[0].description, "GPU 2 (00000000:A3:00.0)");
}

TEST(AmdGpus, HipEmptyCountsAsUnsetAndCudaIsReadThen) {
  FakeAmdHost fake;
  fake.mi210Host();
  fake.setenv("HIP_VISIBLE_DEVICES", "");
  fake.setenv("CUDA_VISIBLE_DEVICES", "4");
  const VendorHost host = findAmdUnits(fake.options());
  EXPECT_THAT(identifiers(host), ElementsAre("4"));
  EXPECT_THAT(records(host), ElementsAre("amd:00000000:E3:00.0"));
  EXPECT_EQ(host.mask, "CUDA_VISIBLE_DEVICES=4");
  fake.setenv("CUDA_VISIBLE_DEVICES", "");
  const VendorHost all = findAmdUnits(fake.options());
  EXPECT_EQ(all.units.size(), 8U);
  EXPECT_EQ(all.mask, std::nullopt);
}

TEST(AmdGpus, HipWinsWhenBothAreSet) {
  FakeAmdHost fake;
  fake.mi210Host();
  fake.setenv("HIP_VISIBLE_DEVICES", "1");
  fake.setenv("CUDA_VISIBLE_DEVICES", "6,7");
  const VendorHost host = findAmdUnits(fake.options());
  EXPECT_THAT(records(host), ElementsAre("amd:00000000:43:00.0"));
  EXPECT_EQ(host.mask, "HIP_VISIBLE_DEVICES=1");
}

TEST(AmdGpus, HipNoDevFilesHidesEveryGpu) {
  FakeAmdHost fake;
  fake.mi210Host();
  fake.setenv("HIP_VISIBLE_DEVICES", "NoDevFiles");
  EXPECT_THAT(failure(fake).what(),
              AllOf(HasSubstr("HIP_VISIBLE_DEVICES='NoDevFiles' leaves no AMD GPU"),
                    HasSubstr("'NoDevFiles' (entry 1)")));
  FakeAmdHost cuda;
  cuda.mi210Host();
  cuda.setenv("CUDA_VISIBLE_DEVICES", "NoDevFiles");
  EXPECT_THAT(failure(cuda).what(), HasSubstr("CUDA_VISIBLE_DEVICES='NoDevFiles'"));
}

TEST(AmdGpus, HipTakesDecimalsWithoutLeadingZerosAndUuidPrefixesAndSkipsRepeats) {
  FakeAmdHost fake;
  fake.mi210Host();
  fake.setenv("HIP_VISIBLE_DEVICES", "GPU-93bb,1,1,GPU-51276ac12ce05db3,01,2");
  const VendorHost host = findAmdUnits(fake.options());
  EXPECT_THAT(identifiers(host), ElementsAre("GPU-93bb", "1"));
  EXPECT_THAT(records(host), ElementsAre("amd:00000000:03:00.0", "amd:00000000:43:00.0"));
  const std::string variable =
      "warning: HIP_VISIBLE_DEVICES='GPU-93bb,1,1,GPU-51276ac12ce05db3,01,2': ";
  EXPECT_THAT(
      linesOf(host.notices),
      ElementsAre(
          variable + "'1' (entry 3) names the GPU that entry 2 chose already ('1'), so HIP skips "
                     "it and reads on",
          variable + "'GPU-51276ac12ce05db3' (entry 4) names the GPU that entry 2 chose already "
                     "('1'), so HIP skips it and reads on",
          variable + "'01' (entry 5) is neither a GPU index nor a GPU-… UUID, so HIP ignores that "
                     "entry and every entry after it"));
  EXPECT_EQ(environmentOf(host, {1, 0}), (Environment{{"HIP_VISIBLE_DEVICES", "1,GPU-93bb"}}));
}

TEST(AmdGpus, HipUuidPrefixIndexesWhatRocrLeft) {
  FakeAmdHost fake;
  fake.mi210Host();
  fake.setenv("ROCR_VISIBLE_DEVICES", "3,5,7");  // GPU-4344…, GPU-a378…, GPU-c34e…
  fake.setenv("HIP_VISIBLE_DEVICES", "GPU-a3,GPU-4");
  const VendorHost host = findAmdUnits(fake.options());
  EXPECT_THAT(identifiers(host), ElementsAre("GPU-a3", "GPU-4"));
  EXPECT_THAT(records(host), ElementsAre("amd:00000000:C3:00.0", "amd:00000000:26:00.0"));
  EXPECT_THAT(linesOf(host.notices), IsEmpty());
  EXPECT_EQ(environmentOf(host, {1}), (Environment{{"HIP_VISIBLE_DEVICES", "GPU-4"}}));
}

TEST(AmdGpus, HipUpperCaseHexOrLowerCasePrefixMatchesNothing) {
  FakeAmdHost fake;
  fake.mi210Host();
  fake.setenv("HIP_VISIBLE_DEVICES", "0,GPU-93BB3629C01AEA1C,1");
  const VendorHost host = findAmdUnits(fake.options());
  EXPECT_THAT(identifiers(host), ElementsAre("0"));
  EXPECT_THAT(linesOf(host.notices),
              ElementsAre("warning: HIP_VISIBLE_DEVICES='0,GPU-93BB3629C01AEA1C,1': "
                          "'GPU-93BB3629C01AEA1C' (entry 2) names no GPU that ROCr left (HIP "
                          "compares UUIDs case-sensitively, and ROCr's are 'GPU-' and lower-case "
                          "hex digits), so HIP ignores that entry and every entry after it"));
  fake.setenv("HIP_VISIBLE_DEVICES", "gpu-93bb3629c01aea1c,1");
  EXPECT_THAT(failure(fake).what(),
              HasSubstr("HIP_VISIBLE_DEVICES='gpu-93bb3629c01aea1c,1' leaves no AMD GPU: "
                        "'gpu-93bb3629c01aea1c' (entry 1) is neither a GPU index nor a GPU-… UUID "
                        "(HIP looks for 'GPU-' in upper case)"));
}

TEST(AmdGpus, HipSharedUuidOfPartitionsTakesTheFirstPartition) {
  FakeAmdHost fake;
  fake.mi300xCpxHost(false);
  fake.setenv("HIP_VISIBLE_DEVICES", "GPU-4b3c2d1e0f102030,GPU-4b3c2d1e0f102030,3");
  const VendorHost host = findAmdUnits(fake.options());
  EXPECT_THAT(identifiers(host), ElementsAre("GPU-4b3c2d1e0f102030", "3"));
  EXPECT_THAT(records(host), ElementsAre("amd:00000000:05:00.0", "amd:00000000:05:00.3"));
  const std::string variable =
      "warning: HIP_VISIBLE_DEVICES='GPU-4b3c2d1e0f102030,GPU-4b3c2d1e0f102030,3': "
      "'GPU-4b3c2d1e0f102030' ";
  const std::string matches =
      "matches 8 units (the partitions of one GPU share its UUID) that ROCr left, and HIP takes "
      "the first, index 0";
  EXPECT_THAT(linesOf(host.notices),
              ElementsAre(variable + "(entry 1) " + matches, variable + "(entry 2) " + matches,
                          variable + "(entry 2) names the GPU that entry 1 chose already "
                                     "('GPU-4b3c2d1e0f102030'), so HIP skips it and reads on"));
  EXPECT_EQ(environmentOf(host, {1, 0}),
            (Environment{{"HIP_VISIBLE_DEVICES", "3,GPU-4b3c2d1e0f102030"}}));
}

// --- Section 6: what exec sets ---

TEST(AmdGpus, ExecWithoutMaskSetsRocrIndicesAndHipCount) {
  FakeAmdHost fake;
  fake.mi210Host();
  const VendorHost host = findAmdUnits(fake.options());
  EXPECT_EQ(environmentOf(host, {5, 2}),
            (Environment{{"ROCR_VISIBLE_DEVICES", "5,2"}, {"HIP_VISIBLE_DEVICES", "0,1"}}));
  EXPECT_EQ(environmentOf(host, {5, 2}, true),
            (Environment{{"ROCR_VISIBLE_DEVICES", "GPU-a3781b5a10fcf54a,GPU-93bb3629c01aea1c"},
                         {"HIP_VISIBLE_DEVICES", "0,1"}}));
}

TEST(AmdGpus, ExecWithoutMaskUsesRocrIndicesOfUsableUnits) {
  FakeAmdHost fake;
  fake.mi210Host();
  fs::remove(fake.render(128));
  const VendorHost host = findAmdUnits(fake.options());
  EXPECT_EQ(host.units[0].recordName, "amd:00000000:43:00.0");
  EXPECT_EQ(environmentOf(host, {0}),
            (Environment{{"ROCR_VISIBLE_DEVICES", "0"}, {"HIP_VISIBLE_DEVICES", "0"}}));
}

TEST(AmdGpus, ExecUuidsOfPartitionOrGpuWithoutUniqueIdIsAUsageError) {
  FakeAmdHost fake;
  fake.mi300xCpxHost(false);
  const VendorHost host = findAmdUnits(fake.options());
  try {
    environmentOf(host, {3}, true);
    ADD_FAILURE() << "no usage error";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("partition 3 of GPU 00000000:05:00.0"),
                                HasSubstr("no UUID of its own")));
  }
  EXPECT_EQ(environmentOf(host, {3}),
            (Environment{{"ROCR_VISIBLE_DEVICES", "3"}, {"HIP_VISIBLE_DEVICES", "0"}}));

  FakeAmdHost plain;
  plain.cpu(0);
  plain.gpu(testing::gpuAt(1, 0x6300, 128));
  const VendorHost bare = findAmdUnits(plain.options());
  EXPECT_THROW(environmentOf(bare, {0}, true), std::invalid_argument);
}

TEST(AmdGpus, ExecNarrowsAnInheritedRocrMaskAndSetsHip) {
  FakeAmdHost fake;
  fake.mi210Host();
  fake.setenv("ROCR_VISIBLE_DEVICES", "GPU-93bb,0x6, 4");
  const VendorHost host = findAmdUnits(fake.options());
  EXPECT_THAT(identifiers(host), ElementsAre("GPU-93bb", "0x6", "4"));
  EXPECT_EQ(environmentOf(host, {2, 0}),
            (Environment{{"ROCR_VISIBLE_DEVICES", "4,GPU-93bb"}, {"HIP_VISIBLE_DEVICES", "0,1"}}));
  // --visible-devices uuid keeps the inherited mask's own entries.
  EXPECT_EQ(environmentOf(host, {1}, true),
            (Environment{{"ROCR_VISIBLE_DEVICES", "0x6"}, {"HIP_VISIBLE_DEVICES", "0"}}));
}

TEST(AmdGpus, ExecNarrowsTheHipMaskInForceAndLeavesRocrAlone) {
  FakeAmdHost fake;
  fake.mi210Host();
  fake.setenv("ROCR_VISIBLE_DEVICES", "1,2,3");
  fake.setenv("HIP_VISIBLE_DEVICES", "2,0");
  const VendorHost host = findAmdUnits(fake.options());
  EXPECT_EQ(environmentOf(host, {1}), (Environment{{"HIP_VISIBLE_DEVICES", "0"}}));
  FakeAmdHost cuda;
  cuda.mi210Host();
  cuda.setenv("CUDA_VISIBLE_DEVICES", "7,6,5");
  const VendorHost viaCuda = findAmdUnits(cuda.options());
  EXPECT_EQ(environmentOf(viaCuda, {2, 0}), (Environment{{"CUDA_VISIBLE_DEVICES", "5,7"}}));
}

// --- Section 9: the tools, when there is no KFD topology ---

TEST(AmdGpus, AmdSmiWithoutTopologyInPciOrder) {
  FakeAmdHost fake;
  fs::remove_all(fake.sysfs() / "class/kfd");
  fs::remove(fake.dev() / "kfd");  // the tools need no kfd
  fake.installTool("amd-smi");
  fake.installTool("rocm-smi");
  const VendorHost host = findAmdUnits(fake.options());
  EXPECT_THAT(identifiers(host), ElementsAre("0", "1", "2"));
  EXPECT_THAT(records(host),
              ElementsAre("amd:00000000:03:00.0", "amd:00000000:63:00.0", "amd:00000000:C3:00.0"));
  EXPECT_EQ(host.units[0].properties,
            (Properties{{"vendor", "amd"}, {"pci.bus_id", "00000000:03:00.0"}}));
  ASSERT_EQ(linesOf(host.notices).size(), 1U);
  EXPECT_THAT(linesOf(host.notices)[0],
              AllOf(HasSubstr("warning: there is no KFD topology at " + fake.nodes().string()),
                    HasSubstr("from amd-smi, in PCI order"),
                    HasSubstr("ROCm numbers GPUs in KFD order, which may differ"),
                    HasSubstr("amd-smi also lists GPUs this process cannot open")));
  EXPECT_EQ(environmentOf(host, {1}),
            (Environment{{"ROCR_VISIBLE_DEVICES", "1"}, {"HIP_VISIBLE_DEVICES", "0"}}));
}

TEST(AmdGpus, RocmSmiWhenThereIsNoAmdSmi) {
  FakeAmdHost fake;
  fs::remove_all(fake.sysfs() / "class");
  fake.installTool("rocm-smi");
  const VendorHost host = findAmdUnits(fake.options());
  EXPECT_THAT(records(host),
              ElementsAre("amd:00000000:03:00.0", "amd:00000000:63:00.0", "amd:00000000:C3:00.0"));
  EXPECT_EQ(host.units[0].properties, (Properties{{"vendor", "amd"},
                                                  {"uuid", "GPU-0000000000000abc"},
                                                  {"pci.bus_id", "00000000:03:00.0"}}));
  EXPECT_EQ(discovery::propertyOf(host.units[1].properties, "uuid"), "GPU-1901ead3a2ecd4a6");
  EXPECT_EQ(discovery::propertyOf(host.units[2].properties, "uuid"), std::nullopt);  // N/A
  ASSERT_EQ(linesOf(host.notices).size(), 1U);
  EXPECT_THAT(linesOf(host.notices)[0], HasSubstr("from rocm-smi, in PCI order"));
  // The masks apply to the tools' list too.
  fake.setenv("ROCR_VISIBLE_DEVICES", "GPU-1901ead3a2ecd4a6");
  EXPECT_THAT(records(findAmdUnits(fake.options())), ElementsAre("amd:00000000:63:00.0"));
}

TEST(AmdGpus, BrokenAmdSmiFailsAndRocmSmiIsNotAskedInstead) {
  FakeAmdHost fake;
  fs::remove_all(fake.sysfs() / "class");
  fake.installTool("rocm-smi");
  fake.tool("amd-smi", "echo 'ERROR:root:Unable to detect any GPU devices'\n");
  DiscoveryError e = failure(fake);
  EXPECT_THAT(e.what(), AllOf(HasSubstr("amd-smi printed something that is not its JSON"),
                              HasSubstr("'ERROR:root:Unable to detect any GPU devices'")));
  fake.tool("amd-smi", "echo 'amdsmi library not found' >&2\nexit 1\n");
  e = failure(fake);
  EXPECT_THAT(e.what(), HasSubstr("amd-smi list --json exited with code 1"));
  EXPECT_THAT(joined(e.details()), HasSubstr("'amdsmi library not found'"));
  fake.tool("amd-smi", "echo '[{\"gpu\": 0}]'\n");
  EXPECT_THAT(failure(fake).what(), HasSubstr("an entry has no \"bdf\""));
}

TEST(AmdGpus, BrokenRocmSmiFailsNamingIt) {
  FakeAmdHost fake;
  fs::remove_all(fake.sysfs() / "class");
  fake.tool("rocm-smi", "echo 'WARNING: No JSON'\n");
  EXPECT_THAT(failure(fake).what(),
              AllOf(HasSubstr("rocm-smi printed something"), HasSubstr("'WARNING: No JSON'")));
}

TEST(AmdGpus, ToolsListingNoGpu) {
  FakeAmdHost fake;
  fs::remove_all(fake.sysfs() / "class");
  fake.tool("amd-smi", "echo '[]'\n");
  const DiscoveryError e = failure(fake);
  EXPECT_THAT(e.what(), HasSubstr("no AMD GPU on this host: amd-smi lists none"));
  EXPECT_EQ(e.kind(), DiscoveryError::Kind::kNoGpu);
}

TEST(AmdGpus, NoTopologyAndNoToolNamesBoth) {
  FakeAmdHost fake;
  fs::remove_all(fake.sysfs() / "class");
  const DiscoveryError e = failure(fake);
  EXPECT_THAT(e.what(), AllOf(HasSubstr("no KFD topology at " + fake.nodes().string()),
                              HasSubstr("amd-smi"), HasSubstr("rocm-smi")));
  EXPECT_EQ(e.kind(), DiscoveryError::Kind::kNoDriver);
}

TEST(AmdGpus, NoToolRunsWhenSysfsAnswers) {
  FakeAmdHost fake;
  fake.mi210Host();
  const fs::path ran = fake.root() / "ran";
  fake.tool("amd-smi", "touch '" + ran.string() + "'\necho '[]'\n");
  fake.tool("rocm-smi", "touch '" + ran.string() + "'\necho '{}'\n");
  EXPECT_EQ(findAmdUnits(fake.options()).units.size(), 8U);
  EXPECT_FALSE(fs::exists(ran));
}

}  // namespace
}  // namespace flink::amd
