#include "host/coordination/CoordinationFile.h"

#include <cstdlib>

namespace flink::coordination {

std::string CoordinationFileChoice::describe() const {
  std::string from;
  switch (source) {
    case CoordinationFileSource::kOption:
      from = "from --coordination-file";
      break;
    case CoordinationFileSource::kVariable:
      from = std::string("from $") + kCoordinationFileVariable;
      break;
    case CoordinationFileSource::kConfiguration:
      from = "from " + where;
      break;
    case CoordinationFileSource::kDefault:
      from = std::string("the default: neither --coordination-file nor $") +
             kCoordinationFileVariable + " names one";
      break;
  }
  return "the coordination file is " + path.string() + " (" + from + ")";
}

CoordinationFileChoice chooseCoordinationFile(
    const std::optional<std::string>& option,
    const std::function<std::optional<ConfiguredCoordinationFile>()>& fromConfiguration) {
  if (option) {
    if (option->empty()) {
      throw std::invalid_argument("--coordination-file needs a path");
    }
    return {*option, CoordinationFileSource::kOption, {}};
  }
  if (const char* variable = std::getenv(kCoordinationFileVariable)) {
    if (*variable == '\0') {
      throw std::invalid_argument(std::string("$") + kCoordinationFileVariable +
                                  " is set but empty: name a file in it, or unset it for " +
                                  kDefaultCoordinationFile);
    }
    if (!std::filesystem::path(variable).is_absolute()) {
      throw std::invalid_argument(std::string("$") + kCoordinationFileVariable + " is '" +
                                  variable +
                                  "', a relative path, which each process would read from its "
                                  "own working directory: name an absolute path");
    }
    return {variable, CoordinationFileSource::kVariable, {}};
  }
  if (fromConfiguration) {
    if (std::optional<ConfiguredCoordinationFile> configured = fromConfiguration()) {
      return {std::move(configured->path), CoordinationFileSource::kConfiguration,
              std::move(configured->where)};
    }
  }
  return {kDefaultCoordinationFile, CoordinationFileSource::kDefault, {}};
}

}  // namespace flink::coordination
