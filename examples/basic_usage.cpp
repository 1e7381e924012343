// The "Basic Usage" example of Flink's GPU driver, in C++: configure the discovery script, make a
// driver through GPUDriverFactory, ask it for two GPUs and print what it found.
//
//   basic_usage [<discovery script>]
//
// The script defaults to the path in Flink's documentation. It is run as
// `<script> 2 --enable-coordination-mode --coordination-file <temporary folder>/coordination` and
// must print GPU indices such as `0,1`.
//
// The coordination file is one of its own, in a folder made under $TMPDIR (else /tmp) and removed
// at the end: the default, /var/tmp/flink-gpu-coordination, is the host's, shared by every worker
// on it (and by Flink's own script), and is no place to try things.
#include <stdlib.h>  // mkdtemp

#include <cerrno>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <system_error>

#include "flink/configuration/Configuration.h"
#include "flink/externalresource/ExternalResourceDriver.h"
#include "flink/externalresource/ExternalResourceInfoSet.h"
#include "flink/externalresource/gpu/GPUDriverFactory.h"
#include "flink/externalresource/gpu/GPUDriverOptions.h"

namespace {

/// A folder made for this run under the temporary folder, removed with everything in it when
/// this goes.
class TemporaryFolder {
 public:
  TemporaryFolder() {
    std::string name = (std::filesystem::temp_directory_path() / "basic-usage-XXXXXX").string();
    if (::mkdtemp(name.data()) == nullptr) {
      throw std::system_error(errno, std::generic_category(), "mkdtemp " + name);
    }
    path_ = name;
  }
  ~TemporaryFolder() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TemporaryFolder(const TemporaryFolder&) = delete;
  TemporaryFolder& operator=(const TemporaryFolder&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace

int main(int argc, char** argv) {
  using flink::Configuration;
  using flink::ExternalResourceDriver;
  using flink::ExternalResourceInfoSet;
  using flink::externalresource::gpu::GPUDriverFactory;
  using flink::externalresource::gpu::GPUDriverOptions;

  const std::string scriptPath = argc > 1 ? argv[1] : "/path/to/gpu-discovery-script.sh";

  try {
    // Declared before the driver, so that the driver (which gives back what it recorded when it
    // goes) is gone before the folder is removed.
    const TemporaryFolder folder;
    Configuration config;
    config.set(GPUDriverOptions::DISCOVERY_SCRIPT_PATH, scriptPath);
    // The arguments are split on whitespace: a $TMPDIR with a space in it would not do.
    config.set(GPUDriverOptions::DISCOVERY_SCRIPT_ARG,
               "--enable-coordination-mode --coordination-file " +
                   (folder.path() / "coordination").string());

    GPUDriverFactory factory;
    // Construction already checks the script (it exists and is executable), so a bad path
    // throws here, not at the first discovery.
    std::unique_ptr<ExternalResourceDriver> driver = factory.createExternalResourceDriver(config);
    const ExternalResourceInfoSet gpuResources = driver->retrieveResourceInfo(2);

    for (const auto& gpu : gpuResources) {
      // Kept from the Java example to show how a property is read; a worker would hand the
      // index to CUDA_VISIBLE_DEVICES or similar.
      [[maybe_unused]] const std::string deviceIndex =
          gpu->getProperty("index").value_or("unknown");
      std::cout << "Available GPU: " << gpu->toString() << '\n';
    }
  } catch (const std::exception& e) {
    std::cerr << "basic_usage: " << e.what() << '\n';
    return EXIT_FAILURE;
  }
  return EXIT_SUCCESS;
}
