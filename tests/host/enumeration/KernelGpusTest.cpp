// The kernel's list of NVIDIA GPUs (/proc/driver/nvidia/gpus/*/information): the driver's format,
// the fixture tree of tests/fixtures/nvidia-proc, and what a reader does with bad input (a skipped
// entry with a notice naming its file, never a crash). Also the kernel's GPUs in the one
// UnitIndex, and enumerateHostGpus when NVML fails with a version mismatch.
#include "host/enumeration/KernelGpus.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "TestSupport.h"
#include "host/enumeration/HostGpus.h"
#include "host/enumeration/UnitIndex.h"

namespace flink::discovery {
namespace {

namespace fs = std::filesystem;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::ScopedEnvironment;
using testing::TempDir;

const fs::path kIslands = fs::path(FLINK_GPU_SOURCE_DIR) / "tests/fixtures/nvidia-proc/islands-8";

// As the driver writes it (nv-procfs.c): tabs and a space between key and value.
constexpr const char* kH200 =
    "Model: \t\t NVIDIA H200\n"
    "IRQ:   \t\t 300\n"
    "GPU UUID: \t GPU-8932F937-d72c-4106-c12f-20bd9faed9f6\n"
    "Video BIOS: \t 96.00.74.00.01\n"
    "Bus Type: \t PCIe\n"
    "DMA Size: \t 52 bits\n"
    "DMA Mask: \t 0xfffffffffffff\n"
    "Bus Location: \t 0000:19:00.0\n"
    "Device Minor: \t 3\n"
    "GPU Excluded:\t No\n";

std::optional<KernelGpu> parse(std::string_view text, std::vector<Notice>& notices,
                               std::string& why, std::string_view folder = "0000:19:00.0") {
  return parseKernelGpuInformation(text, folder, "information", notices, why);
}

std::vector<std::string> texts(const std::vector<Notice>& notices) {
  std::vector<std::string> out;
  for (const Notice& notice : notices) out.push_back(notice.line());
  return out;
}

TEST(KernelGpusTest, ReadsTheDriversFormat) {
  std::vector<Notice> notices;
  std::string why;
  const std::optional<KernelGpu> gpu = parse(kH200, notices, why);
  ASSERT_TRUE(gpu) << why;
  EXPECT_EQ(gpu->pciBusId, "00000000:19:00.0");
  EXPECT_EQ(gpu->model, "NVIDIA H200");
  EXPECT_EQ(gpu->uuid, "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6");  // canonical: lower case
  EXPECT_EQ(gpu->minor, 3u);
  EXPECT_FALSE(gpu->excluded);
  EXPECT_TRUE(notices.empty()) << ::testing::PrintToString(texts(notices));
}

TEST(KernelGpusTest, ExcludedIsYes) {
  std::vector<Notice> notices;
  std::string why;
  std::string text = kH200;
  text.replace(text.find("GPU Excluded:\t No"), 17, "GPU Excluded:\t Yes");
  const std::optional<KernelGpu> gpu = parse(text, notices, why);
  ASSERT_TRUE(gpu);
  EXPECT_TRUE(gpu->excluded);
}

TEST(KernelGpusTest, BadFieldsAreUnknownWithANoteNamingTheFile) {
  std::vector<Notice> notices;
  std::string why;
  const std::optional<KernelGpu> gpu = parse(
      "Model: \t\t \nGPU UUID: \t ??\nBus Location: \t nowhere\nDevice Minor: \t -1\n"
      "GPU Excluded:\t Maybe\n",
      notices, why);
  ASSERT_TRUE(gpu) << why;
  EXPECT_EQ(gpu->pciBusId, "00000000:19:00.0");  // the folder's name
  EXPECT_FALSE(gpu->model);
  EXPECT_FALSE(gpu->uuid);
  EXPECT_FALSE(gpu->minor);
  EXPECT_FALSE(gpu->excluded);
  EXPECT_THAT(
      texts(notices),
      ElementsAre("note: information: 'GPU UUID' is '?\?', not a GPU UUID: the GPU is known "
                  "by its bus id only",
                  "note: information: 'Bus Location' is 'nowhere', not a PCI bus id: the "
                  "folder's name is taken",
                  "note: information: 'Device Minor' is '-1', not a number: the minor is "
                  "not known",
                  "note: information: 'GPU Excluded' is 'Maybe', neither Yes nor No: read "
                  "as No"));
}

TEST(KernelGpusTest, AnEntryWithoutTheDriversLinesOrABusIdIsSkipped) {
  std::vector<Notice> notices;
  std::string why;
  EXPECT_FALSE(parse("", notices, why));
  EXPECT_THAT(why, HasSubstr("none of the lines the NVIDIA driver writes"));
  EXPECT_FALSE(parse(std::string("\0\xff\xfe:\x01\n\n::::\n", 11), notices, why));
  EXPECT_FALSE(parse("Model: NVIDIA H200\n", notices, why, "not-a-bus-id"));
  EXPECT_THAT(why, HasSubstr("no PCI bus id"));
}

TEST(KernelGpusTest, TheFixtureTreeInBusOrderWithItsExcludedGpu) {
  const KernelGpus kernel = readKernelGpus(kIslands);
  EXPECT_TRUE(kernel.present);
  EXPECT_TRUE(kernel.notices.empty()) << ::testing::PrintToString(texts(kernel.notices));
  ASSERT_EQ(kernel.gpus.size(), 8u);
  EXPECT_EQ(kernel.gpus[1].pciBusId, "00000000:3B:00.0");
  EXPECT_TRUE(kernel.gpus[1].excluded);
  // NVML's indices skip the excluded GPU.
  const std::vector<GpuDevice> devices = kernel.devices();
  ASSERT_EQ(devices.size(), 7u);
  EXPECT_EQ(devices[0].uuid, "GPU-a0000000-1111-4222-8333-444400000000");
  EXPECT_EQ(devices[1].identifier, "1");
  EXPECT_EQ(devices[1].uuid, "GPU-a0000002-1111-4222-8333-444400000002");
  EXPECT_EQ(devices[1].pciBusId, "00000000:4C:00.0");
  EXPECT_EQ(devices[1].name, "NVIDIA H200");
  EXPECT_EQ(devices[1].minorNumber, 2u);
}

TEST(KernelGpusTest, TheUnitIndexNamesTheKernelsGpusByIndexUuidAndBusId) {
  const UnitIndex index = UnitIndex::of(readKernelGpus(kIslands).devices());
  const auto idOf = [&](std::string_view text) -> std::optional<std::string> {
    const std::optional<UnitRef> ref = index.entry(text).unit;
    return ref ? std::optional(index[*ref].id) : std::nullopt;
  };
  EXPECT_EQ(idOf("1"), "1");
  EXPECT_EQ(idOf("GPU-a0000002-1111-4222-8333-444400000002"), "1");
  EXPECT_EQ(idOf("0000:4c:00.0"), "1");
  EXPECT_EQ(idOf("GPU-a0000001-1111-4222-8333-444400000001"), std::nullopt);  // excluded
  EXPECT_EQ(idOf("7"), std::nullopt);
}

TEST(KernelGpusTest, UnreadableAndDuplicateEntriesAreSkippedByName) {
  TempDir dir("kernel-gpus");
  const fs::path gpus = dir / "gpus";
  fs::create_directories(gpus / "0000:19:00.0");
  std::ofstream(gpus / "0000:19:00.0" / "information") << kH200;
  // The same GPU again, under another folder: not a second GPU.
  fs::create_directories(gpus / "0000:1a:00.0");
  std::ofstream(gpus / "0000:1a:00.0" / "information") << kH200;
  // A folder without its file; a file of junk.
  fs::create_directories(gpus / "0000:1b:00.0");
  fs::create_directories(gpus / "junk");
  std::ofstream(gpus / "junk" / "information") << "\x01\x02 nothing here\n";
  const KernelGpus kernel = readKernelGpus(dir.path());
  ASSERT_EQ(kernel.gpus.size(), 1u);
  EXPECT_EQ(kernel.gpus[0].file, gpus / "0000:19:00.0" / "information");
  const std::vector<std::string> lines = texts(kernel.notices);
  EXPECT_THAT(lines,
              Contains("warning: skipped " + (gpus / "0000:1b:00.0" / "information").string() +
                       ": No such file or directory"));
  EXPECT_THAT(lines, Contains(HasSubstr("skipped " + (gpus / "junk" / "information").string() +
                                        ": none of the lines")));
  EXPECT_THAT(lines, Contains("note: " + (gpus / "0000:1a:00.0" / "information").string() +
                              ": 'Bus Location' 00000000:19:00.0 is not its folder's name: the "
                              "file's is taken"));
  EXPECT_THAT(lines,
              Contains("warning: skipped " + (gpus / "0000:1a:00.0" / "information").string() +
                       ": its bus id 00000000:19:00.0 is another entry's"));
}

TEST(KernelGpusTest, NoFolderIsNoDriver) {
  TempDir dir("kernel-gpus");
  const KernelGpus kernel = readKernelGpus(dir / "absent");
  EXPECT_FALSE(kernel.present);
  EXPECT_TRUE(kernel.gpus.empty());
  EXPECT_THAT(describeKernelList(kernel, dir / "absent"), HasSubstr("does not exist"));
}

TEST(KernelGpusTest, TheRootIsFlinkGpuProcRootWhenSet) {
  ScopedEnvironment root(kProcRootVariable, kIslands.string());
  EXPECT_EQ(nvidiaProcRoot(), kIslands);
  root.set("");
  EXPECT_EQ(nvidiaProcRoot(), fs::path("/proc/driver/nvidia"));
}

TEST(KernelGpusTest, AnExcludedGpuIsMatchedByUuidOrBusId) {
  const KernelGpus kernel = readKernelGpus(kIslands);
  GpuDevice byUuid;
  byUuid.identifier = "1";
  byUuid.uuid = "GPU-A0000001-1111-4222-8333-444400000001";
  EXPECT_NE(excludedGpuOf(byUuid, kernel), nullptr);
  GpuDevice migInstance;  // carries its GPU's bus id
  migInstance.identifier = "MIG-00000000-0000-0000-0000-000000000001";
  migInstance.uuid = migInstance.identifier;
  migInstance.pciBusId = "0000:3b:00.0";
  EXPECT_NE(excludedGpuOf(migInstance, kernel), nullptr);
  GpuDevice other;
  other.identifier = "0";
  other.uuid = "GPU-a0000000-1111-4222-8333-444400000000";
  other.pciBusId = "00000000:19:00.0";
  EXPECT_EQ(excludedGpuOf(other, kernel), nullptr);
}

class KernelListOnMismatchTest : public ::testing::Test {
 protected:
  KernelListOnMismatchTest() {
    std::ofstream(dir_ / "host.json") << R"({"init_error": 18, "devices": []})";
    options_.nvidiaSmi.searchPath = (dir_ / "empty-bin").string();
    options_.nvidiaSmi.folders = {};
  }
  TempDir dir_{"kernel-mismatch"};
  HostGpuOptions options_;
  ScopedEnvironment library_{"FLINK_GPU_NVML_LIBRARY", FAKE_NVML_FULL};
  ScopedEnvironment host_{"FAKE_NVML_DEVICES", (dir_ / "host.json").string()};
  ScopedEnvironment root_{kProcRootVariable, kIslands.string()};
};

TEST_F(KernelListOnMismatchTest, ADiscoveryFailsWithTheFixAndTheKernelsGpus) {
  try {
    enumerateHostGpus(options_);
    FAIL() << "no exception";
  } catch (const DiscoveryError& e) {
    EXPECT_EQ(e.kind(), DiscoveryError::Kind::kNvmlVersionMismatch);
    EXPECT_THAT(e.what(), HasSubstr("Driver/library version mismatch"));
    EXPECT_THAT(e.what(), HasSubstr("CUDA fails the same way, so no GPU is handed out: reboot, or "
                                    "once nothing uses the GPUs reload the kernel module: rmmod "
                                    "nvidia_uvm nvidia_drm nvidia_modeset nvidia && modprobe "
                                    "nvidia"));
    ASSERT_FALSE(e.details().empty());
    EXPECT_THAT(e.details()[0],
                HasSubstr("the kernel's driver knows 7 GPU(s): 0 00000000:19:00.0 "
                          "(GPU-a0000000-1111-4222-8333-444400000000, NVIDIA H200)"));
    EXPECT_THAT(e.details()[0], HasSubstr("; it excludes 00000000:3B:00.0"));
  }
}

TEST_F(KernelListOnMismatchTest, AnOperatorsCommandGetsTheKernelsList) {
  options_.kernelListOnMismatch = true;
  const HostGpus gpus = enumerateHostGpus(options_);
  EXPECT_EQ(gpus.source, HostGpuSource::kKernel);
  EXPECT_EQ(gpus.found.devices.size(), 7u);
  ASSERT_FALSE(gpus.found.notices.empty());
  EXPECT_EQ(gpus.found.notices[0].kind, Notice::Kind::kWarning);
  EXPECT_THAT(gpus.found.notices[0].text, HasSubstr("the GPUs are the kernel's driver's"));
}

}  // namespace
}  // namespace flink::discovery
