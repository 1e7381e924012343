// A sample external-resource plugin: a driver for devices listed in the configuration.
//
// Build it as a shared library against flink-gpu's headers, put it in a sub-folder of the plugins
// folder ($FLINK_PLUGINS_DIR/static-devices/libstatic-devices-plugin.so) and configure:
//
//   external-resources: fpga
//   external-resource.fpga.amount: 2
//   external-resource.fpga.driver-factory.class: org.example.flink.StaticDeviceDriverFactory
//   external-resource.fpga.param.devices: fpga0,fpga1,fpga2
//
// The driver hands out the first <amount> devices of `devices`; each info has the property "id".
// A real driver would ask the device's own tools instead.
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "flink/configuration/ConfigOptions.h"
#include "flink/configuration/Configuration.h"
#include "flink/core/plugin/ExternalResourcePlugin.h"
#include "flink/externalresource/ExternalResourceDriver.h"
#include "flink/externalresource/ExternalResourceDriverFactory.h"
#include "flink/externalresource/ExternalResourceInfo.h"
#include "flink/util/Exceptions.h"

namespace {

const flink::ConfigOption<std::string> kDevices =
    flink::ConfigOptions::key("devices").stringType().noDefaultValue();

class StaticDeviceInfo final : public flink::ExternalResourceInfo {
 public:
  explicit StaticDeviceInfo(std::string id) : id_(std::move(id)) {}
  std::optional<std::string> getProperty(std::string_view key) const override {
    if (key == "id") return id_;
    return std::nullopt;
  }
  std::vector<std::string> getKeys() const override { return {"id"}; }
  std::string toString() const override { return "StaticDevice(" + id_ + ")"; }

 private:
  std::string id_;
};

class StaticDeviceDriver final : public flink::ExternalResourceDriver {
 public:
  explicit StaticDeviceDriver(std::vector<std::string> devices) : devices_(std::move(devices)) {}

  flink::ExternalResourceInfoSet retrieveResourceInfo(std::int64_t amount) override {
    if (amount <= 0) throw std::invalid_argument("the amount must be positive");
    if (static_cast<std::uint64_t>(amount) > devices_.size()) {
      throw flink::FlinkException("asked for " + std::to_string(amount) + " devices, only " +
                                  std::to_string(devices_.size()) + " are configured");
    }
    std::vector<flink::ExternalResourceInfoSet::value_type> infos;
    for (std::int64_t i = 0; i < amount; ++i) {
      infos.push_back(std::make_shared<StaticDeviceInfo>(devices_[static_cast<std::size_t>(i)]));
    }
    return flink::ExternalResourceInfoSet(std::move(infos));
  }

 private:
  std::vector<std::string> devices_;
};

class StaticDeviceDriverFactory final : public flink::ExternalResourceDriverFactory {
 public:
  std::unique_ptr<flink::ExternalResourceDriver> createExternalResourceDriver(
      const flink::Configuration& config) override {
    const std::optional<std::string> listed = config.getOptional(kDevices);
    if (!listed) {
      throw flink::IllegalConfigurationException("the parameter 'devices' is not set");
    }
    std::vector<std::string> devices;
    std::string current;
    for (char c : *listed + ",") {
      if (c != ',') {
        if (c != ' ') current += c;
      } else if (!current.empty()) {
        devices.push_back(current);
        current.clear();
      }
    }
    return std::make_unique<StaticDeviceDriver>(std::move(devices));
  }
};

flink::ExternalResourceDriverFactory* createStaticDeviceDriverFactory() {
  return new StaticDeviceDriverFactory();
}

const FlinkExternalResourceFactoryEntry kFactories[] = {
    {"org.example.flink.StaticDeviceDriverFactory", &createStaticDeviceDriverFactory},
};

const FlinkExternalResourcePlugin kPlugin = {
    FLINK_EXTERNAL_RESOURCE_PLUGIN_ABI_VERSION,
    FLINK_EXTERNAL_RESOURCE_PLUGIN_CXX_ABI,
    "static-devices",
    sizeof(kFactories) / sizeof(kFactories[0]),
    kFactories,
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const FlinkExternalResourcePlugin*
FLINK_EXTERNAL_RESOURCE_PLUGIN_ENTRY_POINT() {
  return &kPlugin;
}
