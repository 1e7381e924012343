// See DlError.h.
#include "util/DlError.h"

#include <dlfcn.h>

namespace flink::dl {

std::string takeError() {
  const char* text = ::dlerror();
  std::string message = text != nullptr ? text : "";
  // The second call frees the record, and with it the text read above (copied first). Where
  // dlerror() keeps no record (other C libraries), it only answers null.
  static_cast<void>(::dlerror());
  return message;
}

}  // namespace flink::dl
