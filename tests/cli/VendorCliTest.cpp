// The AMD and Intel discoveries as users run them: their scripts as Flink's driver runs them,
// `flink-gpu discover --vendor`, `flink-gpu exec --vendor`, and their records in the coordination
// file beside NVIDIA's and Flink's own script. The hosts are stand-in sysfs and /dev trees
// (FLINK_GPU_SYSFS_ROOT, FLINK_GPU_DEV_ROOT) laid out as the kernel lays them out; the rules
// themselves are tested in tests/host/amd/ and tests/host/intel/.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "CliRun.h"
#include "TestSupport.h"

namespace flink::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

const fs::path kPlugins = fs::path(DEFAULT_DISCOVERY_SCRIPT).parent_path();

void write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

class VendorCliTest : public ::testing::Test {
 protected:
  VendorCliTest() {
    // AMD: KFD node 0 is the CPU; nodes 1 and 2 are GPUs on buses 0x63 and 0x43, so KFD order
    // (ROCm's) is not PCI order.
    write(sysfs() / "class/kfd/kfd/topology/nodes/0/properties",
          "cpu_cores_count 64\nsimd_count 0\nlocation_id 0\ndrm_render_minor 0\n");
    amdGpu(1, 0x63, 128, 0x1111222233334444);
    amdGpu(2, 0x43, 129, 0x5555666677778888);
    amdGpu(3, 0x03, 131, 0);  // a board that reports no unique_id: no UUID
    write(dev() / "kfd", "");
    // Intel: one two-tile card under xe at 0000:5a:00.0, render node 130.
    const fs::path card = sysfs() / "devices/pci0000:00/0000:5a:00.0";
    write(card / "vendor", "0x8086\n");
    write(card / "device", "0x0bd5\n");
    write(card / "uevent", "DRIVER=xe\nPCI_SLOT_NAME=0000:5a:00.0\n");
    write(card / "tile0/physical_vram_size_bytes", "68719476736\n");
    write(card / "tile1/physical_vram_size_bytes", "68719476736\n");
    fs::create_directories(card / "drm/renderD130");
    fs::create_directories(sysfs() / "bus/pci/drivers/xe");
    fs::create_directory_symlink("../../../../bus/pci/drivers/xe", card / "driver");
    fs::create_directories(sysfs() / "class/drm/card1");
    fs::create_directory_symlink("../../../devices/pci0000:00/0000:5a:00.0",
                                 sysfs() / "class/drm/card1/device");
    write(dev() / "dri/renderD130", "");
  }

  fs::path sysfs() const { return dir_.path() / "sys"; }
  fs::path dev() const { return dir_.path() / "dev"; }
  std::string coordinationFile() const { return (dir_.path() / "coordination").string(); }

  void amdGpu(int node, unsigned bus, unsigned renderMinor, unsigned long long uniqueId) {
    write(sysfs() / ("class/kfd/kfd/topology/nodes/" + std::to_string(node) + "/properties"),
          "simd_count 416\nlocation_id " + std::to_string(bus << 8) +
              "\ndomain 0\ndrm_render_minor " + std::to_string(renderMinor) + "\nunique_id " +
              std::to_string(uniqueId) + "\ndevice_id 29711\nlocal_mem_size 68702699520\n");
    char name[16];
    std::snprintf(name, sizeof name, "0000:%02x:00.0", bus);
    write(sysfs() / "bus/pci/devices" / name / "product_name", "AMD Instinct MI210\n");
    write(dev() / ("dri/renderD" + std::to_string(renderMinor)), "");
  }

  /// Runs flink-gpu on the stand-in trees, without any vendor's mask inherited.
  CliRun cli(const std::vector<std::string>& args, std::vector<std::string> environment = {}) {
    environment.insert(environment.begin(), {"FLINK_GPU_SYSFS_ROOT=" + sysfs().string(),
                                             "FLINK_GPU_DEV_ROOT=" + dev().string()});
    std::vector<std::string> unset{"-u", "ROCR_VISIBLE_DEVICES",    "-u", "HIP_VISIBLE_DEVICES",
                                   "-u", "ZE_AFFINITY_MASK",        "-u", "ONEAPI_DEVICE_SELECTOR",
                                   "-u", "ZE_FLAT_DEVICE_HIERARCHY"};
    environment.insert(environment.begin(), unset.begin(), unset.end());
    return runCli(args, environment);
  }

  /// Runs `<vendor>-gpu-discovery.sh <args>` as Flink's driver runs it.
  CliRun script(const std::string& vendor, const std::vector<std::string>& args,
                std::vector<std::string> environment = {}) {
    environment.insert(environment.begin(), {"FLINK_GPU_SYSFS_ROOT=" + sysfs().string(),
                                             "FLINK_GPU_DEV_ROOT=" + dev().string()});
    return runCliAt(kPlugins / (vendor + "-gpu-discovery.sh"), dir_.path(), args, environment);
  }

  TempDir dir_{"vendor-cli-test"};
};

TEST_F(VendorCliTest, TheScriptsAnswerFlinksProtocolInTheRuntimesOrder) {
  const CliRun amd = script("amd", {"2"});
  EXPECT_EQ(amd.exitCode, 0) << amd;
  EXPECT_EQ(amd.out, "0,1\n") << amd;
  const CliRun intel = script("intel", {"2"});
  EXPECT_EQ(intel.exitCode, 0) << intel;
  EXPECT_EQ(intel.out, "0,1\n") << intel;  // FLAT: one device per tile
  const CliRun composite = script("intel", {"2"}, {"ZE_FLAT_DEVICE_HIERARCHY=COMPOSITE"});
  EXPECT_EQ(composite.exitCode, 1) << composite;
  EXPECT_EQ(composite.out, "") << composite;
  EXPECT_THAT(firstLine(composite.err), HasSubstr("2 requested")) << composite;

  const CliRun tooMany =
      script("amd", {"4", "--enable-coordination-mode", "--coordination-file", coordinationFile()});
  EXPECT_EQ(tooMany.exitCode, 1) << tooMany;
  EXPECT_EQ(tooMany.out, "") << tooMany;
  EXPECT_THAT(firstLine(tooMany.err), HasSubstr("4 requested")) << tooMany;
}

TEST_F(VendorCliTest, NvidiaOptionsAreRefusedByTheOtherVendorsPrograms) {
  const CliRun gpus = script("amd", {"1", "--gpus", "0,1"});
  EXPECT_EQ(gpus.exitCode, 1) << gpus;
  EXPECT_EQ(gpus.out, "") << gpus;
  EXPECT_THAT(firstLine(gpus.err), HasSubstr("--gpus")) << gpus;
  const CliRun mig = script("intel", {"1", "--mig"});
  EXPECT_EQ(mig.exitCode, 1) << mig;
  EXPECT_THAT(firstLine(mig.err), HasSubstr("--mig")) << mig;
}

TEST_F(VendorCliTest, DiscoverVendorShowsThatVendorsProperties) {
  const CliRun run = cli({"discover", "--vendor", "amd", "--amount", "2", "--format", "json"});
  ASSERT_EQ(run.exitCode, 0) << run;
  const nlohmann::json gpus = nlohmann::json::parse(run.out).at("gpu");
  ASSERT_EQ(gpus.size(), 2u) << run;
  EXPECT_EQ(gpus[0].at("index"), "0");
  EXPECT_EQ(gpus[0].at("vendor"), "amd");
  // KFD node 1 is ROCm's device 0, whatever its bus.
  EXPECT_EQ(gpus[0].at("pci.bus_id"), "00000000:63:00.0");
  EXPECT_EQ(gpus[0].at("uuid"), "GPU-1111222233334444");
  EXPECT_EQ(gpus[0].at("name"), "AMD Instinct MI210");
  EXPECT_EQ(gpus[1].at("pci.bus_id"), "00000000:43:00.0");

  const CliRun intel = cli({"discover", "--vendor", "intel", "--format", "json"});
  ASSERT_EQ(intel.exitCode, 0) << intel;
  const nlohmann::json tile = nlohmann::json::parse(intel.out).at("gpu").at(0);
  EXPECT_EQ(tile.at("vendor"), "intel");
  EXPECT_EQ(tile.at("pci.bus_id"), "00000000:5A:00.0");
  EXPECT_EQ(tile.at("tile"), "0");
  EXPECT_EQ(tile.at("memory.total"), "65536");
  EXPECT_FALSE(tile.contains("uuid"));

  const CliRun text = cli({"discover", "--vendor", "amd"});
  EXPECT_EQ(text.out, "GPU Device(0)\n") << text;
}

TEST_F(VendorCliTest, AVendorThatIsNoneOfTheThreeOrBesideAScriptIsAUsageError) {
  const CliRun bad = cli({"discover", "--vendor", "matrox"});
  EXPECT_EQ(bad.exitCode, 2) << bad;
  EXPECT_THAT(bad.err, HasSubstr("matrox")) << bad;
  const CliRun both =
      cli({"discover", "--vendor", "amd", "--discovery-script", DEFAULT_DISCOVERY_SCRIPT});
  EXPECT_EQ(both.exitCode, 2) << both;
  EXPECT_THAT(both.err, HasSubstr("--discovery-script")) << both;
  const CliRun execBad = cli({"exec", "--vendor", "3dfx", "-n", "1", "--", "true"});
  EXPECT_EQ(execBad.exitCode, 2) << execBad;
  for (const std::vector<std::string>& nvidiaOnly :
       {std::vector<std::string>{"--gpus", "0"}, {"--mig"}, {"--bind-cpus"}}) {
    std::vector<std::string> args{"exec", "--vendor", "amd", "-n", "1"};
    args.insert(args.end(), nvidiaOnly.begin(), nvidiaOnly.end());
    args.insert(args.end(), {"--coordination-file", coordinationFile(), "--", "true"});
    const CliRun run = cli(args);
    EXPECT_EQ(run.exitCode, 2) << run;
    EXPECT_THAT(run.err, HasSubstr(nvidiaOnly.front())) << run;
  }
  EXPECT_FALSE(fs::exists(coordinationFile()));
}

TEST_F(VendorCliTest, ExecSetsTheVendorsVariablesAndNeverCudas) {
  const CliRun plain = cli({"exec", "--vendor", "amd", "-n", "2", "--coordination-file",
                            coordinationFile(), "--", "env"});
  ASSERT_EQ(plain.exitCode, 0) << plain;
  EXPECT_THAT(linesOf(plain.out), ::testing::Contains("ROCR_VISIBLE_DEVICES=0,1")) << plain;
  EXPECT_THAT(linesOf(plain.out), ::testing::Contains("HIP_VISIBLE_DEVICES=0,1")) << plain;
  EXPECT_FALSE(hasLineStartingWith(plain.out, "CUDA_VISIBLE_DEVICES=")) << plain;
  EXPECT_FALSE(hasLineStartingWith(plain.out, "CUDA_DEVICE_ORDER=")) << plain;

  // --visible-devices uuid: ROCr's GPU-… form; a unit without a UUID of its own is a usage error
  // and nothing is left recorded.
  const std::string fresh = (dir_.path() / "uuid-coordination").string();
  const CliRun uuids = cli({"exec", "--vendor", "amd", "-n", "2", "--visible-devices", "uuid",
                            "--coordination-file", fresh, "--", "env"});
  ASSERT_EQ(uuids.exitCode, 0) << uuids;
  EXPECT_THAT(linesOf(uuids.out),
              ::testing::Contains("ROCR_VISIBLE_DEVICES=GPU-1111222233334444,GPU-5555666677778888"))
      << uuids;
  const CliRun noUuid = cli({"exec", "--vendor", "amd", "-n", "3", "--visible-devices", "uuid",
                             "--coordination-file", fresh, "--", "env"});
  EXPECT_EQ(noUuid.exitCode, 2) << noUuid;
  EXPECT_EQ(noUuid.out, "") << noUuid;
  EXPECT_EQ(firstLine(noUuid.err),
            "flink-gpu: error: --visible-devices uuid: GPU 2 (00000000:03:00.0) has no UUID (its "
            "KFD node has no unique_id)")
      << noUuid;
  // The two records of the first command are gone with it; the third command's were released.
  const CliRun status = cli({"status", "--coordination-file", fresh, "--format", "json"});
  const nlohmann::json statusJson = nlohmann::json::parse(status.out);
  for (const auto& record : statusJson.at("records")) {
    EXPECT_EQ(record.at("running"), false) << status;
  }

  const CliRun intel = cli({"exec", "--vendor", "intel", "-n", "1", "--coordination-file",
                            coordinationFile(), "--", "env"});
  ASSERT_EQ(intel.exitCode, 0) << intel;
  EXPECT_THAT(linesOf(intel.out), ::testing::Contains("ZE_AFFINITY_MASK=0")) << intel;
  EXPECT_TRUE(hasLineStartingWith(intel.out, "ZE_ENABLE_PCI_ID_DEVICE_ORDER=1")) << intel;
  EXPECT_FALSE(hasLineStartingWith(intel.out, "CUDA_VISIBLE_DEVICES=")) << intel;
  const CliRun kept = cli({"exec", "--vendor", "intel", "-n", "1", "--coordination-file",
                           coordinationFile(), "--", "env"},
                          {"ZE_ENABLE_PCI_ID_DEVICE_ORDER=0"});
  ASSERT_EQ(kept.exitCode, 0) << kept;
  EXPECT_THAT(linesOf(kept.out), ::testing::Contains("ZE_ENABLE_PCI_ID_DEVICE_ORDER=0")) << kept;

  // Without --vendor, exec sets no AMD or Intel variable.
  const CliRun nvidia = cli(
      {"exec", "--gpus", "0", "-n", "1", "--coordination-file", coordinationFile(), "--", "env"});
  ASSERT_EQ(nvidia.exitCode, 0) << nvidia;
  EXPECT_FALSE(hasLineStartingWith(nvidia.out, "ROCR_VISIBLE_DEVICES=")) << nvidia;
  EXPECT_FALSE(hasLineStartingWith(nvidia.out, "ZE_AFFINITY_MASK=")) << nvidia;
}

TEST_F(VendorCliTest, ExecsAllocationFileListsTheUnitsInTheVendorsVariablesOrder) {
  const CliRun run =
      cli({"exec", "--vendor", "amd", "-n", "2", "--coordination-file", coordinationFile(), "--",
           "/bin/sh", "-c", "cat \"$FLINK_GPU_ALLOCATION_FILE\""});
  ASSERT_EQ(run.exitCode, 0) << run;
  const nlohmann::json file = nlohmann::json::parse(run.out, nullptr, false);
  ASSERT_TRUE(file.is_object()) << run;
  // ROCR_VISIBLE_DEVICES=0,1: ROCr's GPUs 0 and 1, KFD nodes 1 and 2.
  const auto unit = [](const char* index, const char* uuid, const char* busId) {
    return nlohmann::json{{"index", index},
                          {"uuid", uuid},
                          {"pci.bus_id", busId},
                          {"name", "AMD Instinct MI210"},
                          {"memory.total", 65520}};
  };
  EXPECT_EQ(file.at("units"),
            nlohmann::json::array({unit("0", "GPU-1111222233334444", "00000000:63:00.0"),
                                   unit("1", "GPU-5555666677778888", "00000000:43:00.0")}))
      << run;
  EXPECT_EQ(file.at("cpus"), nullptr) << run;
}

TEST_F(VendorCliTest, EveryVendorSharesOneFileBesideFlinksScriptAndEachGetsItsOwnGpuZero) {
  LiveProcess worker;
  const std::string pid = std::to_string(worker.pid());
  // Flink's own script takes NVIDIA GPU 0 for the worker.
  const CliRun flink =
      runCliAt(FLINK_SCRIPT, dir_.path(), {coordinationFile(), "1", pid, "0", "1"});
  ASSERT_EQ(flink.exitCode, 0) << flink;
  EXPECT_EQ(flink.out, "0\n");
  // The AMD and Intel workers get their GPU 0 from the same file.
  const std::vector<std::string> coordinated{
      "1", "--enable-coordination-mode", "--coordination-file", coordinationFile(), "--owner-pid",
      pid};
  const CliRun amd = script("amd", coordinated);
  ASSERT_EQ(amd.exitCode, 0) << amd;
  EXPECT_EQ(amd.out, "0\n");
  const CliRun intel = script("intel", coordinated);
  ASSERT_EQ(intel.exitCode, 0) << intel;
  EXPECT_EQ(intel.out, "0\n");
  const std::vector<std::string> lines = readLines(coordinationFile());
  ASSERT_EQ(lines.size(), 3u) << readFile(coordinationFile());
  EXPECT_EQ(lines[0], "0 " + pid);
  EXPECT_TRUE(lines[1].starts_with("amd:00000000:63:00.0\t" + pid + "\t")) << lines[1];
  EXPECT_TRUE(lines[2].starts_with("intel:00000000:5A:00.0/0\t" + pid + "\t")) << lines[2];
  EXPECT_EQ(lines[1].find(' '), std::string::npos);
  EXPECT_EQ(lines[2].find(' '), std::string::npos);

  // A second AMD worker gets the other GPU; a second Intel one the other tile, not the card.
  const CliRun amd2 = script("amd", {"1", "--enable-coordination-mode", "--coordination-file",
                                     coordinationFile(), "--owner-pid", pid});
  EXPECT_EQ(amd2.out, "1\n") << amd2;
  const CliRun card = script("intel", coordinated, {"ZE_FLAT_DEVICE_HIERARCHY=COMPOSITE"});
  EXPECT_EQ(card.exitCode, 1) << card;
  EXPECT_THAT(card.err, HasSubstr("its tile intel:00000000:5A:00.0/0")) << card;

  // status shows every record with its vendor.
  const CliRun status =
      cli({"status", "--coordination-file", coordinationFile(), "--format", "json"});
  ASSERT_EQ(status.exitCode, 0) << status;
  const nlohmann::json records = nlohmann::json::parse(status.out).at("records");
  ASSERT_EQ(records.size(), 4u) << status;
  EXPECT_EQ(records[0].at("vendor"), "nvidia");
  EXPECT_EQ(records[1].at("vendor"), "amd");
  EXPECT_EQ(records[1].at("gpu"), "amd:00000000:63:00.0");
  EXPECT_EQ(records[1].at("running"), true);
  EXPECT_EQ(records[2].at("vendor"), "intel");
  const CliRun table = cli({"status", "--coordination-file", coordinationFile()});
  EXPECT_THAT(
      linesOf(table.out),
      ::testing::Contains(::testing::MatchesRegex("amd:00000000:63:00\\.0 +" + pid + " +running")))
      << table;

  // The worker ends: Flink's script takes its GPU 0 back with `sed "/0 /d"`, which leaves the
  // AMD and Intel lines alone; release --owner takes the rest, of every vendor.
  worker.stop();
  const CliRun again = runCliAt(FLINK_SCRIPT, dir_.path(),
                                {coordinationFile(), "1", std::to_string(::getpid()), "0"});
  ASSERT_EQ(again.exitCode, 0) << again;
  EXPECT_EQ(readLines(coordinationFile()).size(), 4u) << readFile(coordinationFile());
  const CliRun release =
      cli({"release", "--owner", pid, "--coordination-file", coordinationFile()});
  ASSERT_EQ(release.exitCode, 0) << release;
  const std::string left = readFile(coordinationFile());
  EXPECT_THAT(left, Not(HasSubstr("amd:"))) << left;
  EXPECT_THAT(left, Not(HasSubstr("intel:"))) << left;
  EXPECT_THAT(left, HasSubstr("0 " + std::to_string(::getpid()))) << left;
}

TEST_F(VendorCliTest, AFlinkConfigurationWithVendorAmdRunsItsDefaultScript) {
  // No discovery-script.path: the driver takes plugins/external-resource-gpu/amd-gpu-discovery.sh
  // under Flink's home (the build folder, above flink-gpu's bin/).
  write(dir_.path() / "conf/config.yaml", "");
  const std::string conf = "--config=" + (dir_.path() / "conf").string();
  const CliRun run = cli({"discover", conf, "--format", "json", "-Dexternal-resources=gpu",
                          "-Dexternal-resource.gpu.amount=1",
                          "-Dexternal-resource.gpu.driver-factory.class="
                          "org.apache.flink.externalresource.gpu.GPUDriverFactory",
                          "-Dexternal-resource.gpu.param.vendor=amd"});
  ASSERT_EQ(run.exitCode, 0) << run;
  const nlohmann::json gpu = nlohmann::json::parse(run.out).at("resources").at("gpu").at(0);
  EXPECT_EQ(gpu.at("index"), "0");
  EXPECT_EQ(gpu.at("vendor"), "amd");
  EXPECT_EQ(gpu.at("pci.bus_id"), "00000000:63:00.0");
  EXPECT_EQ(gpu.at("render_minor"), "128");

  const CliRun bad =
      cli({"discover", conf, "-Dexternal-resources=gpu", "-Dexternal-resource.gpu.amount=1",
           "-Dexternal-resource.gpu.driver-factory.class="
           "org.apache.flink.externalresource.gpu.GPUDriverFactory",
           "-Dexternal-resource.gpu.param.vendor=AMD"});
  EXPECT_EQ(bad.exitCode, 2) << bad;
  EXPECT_THAT(bad.err, HasSubstr("expected nvidia, amd or intel")) << bad;
}

TEST_F(VendorCliTest, NvidiasDiscoveryIgnoresTheOtherVendorsTreesAndMasks) {
  const CliRun run =
      runCliAt(DEFAULT_DISCOVERY_SCRIPT, dir_.path(), {"2", "--gpus", "0,1"},
               {"FLINK_GPU_SYSFS_ROOT=" + sysfs().string(), "FLINK_GPU_DEV_ROOT=" + dev().string(),
                "ROCR_VISIBLE_DEVICES=1", "ZE_AFFINITY_MASK=1"});
  EXPECT_EQ(run.exitCode, 0) << run;
  EXPECT_EQ(run.out, "0,1\n") << run;
}

}  // namespace
}  // namespace flink::testing
