#include "schedule/LoweredFunc.h"

#include <sstream>

#include "lang/IRPrinter.h"

namespace kiln {

std::string buffer_descriptor_name(const std::string &buffer) {
    return buffer + ".buffer";
}

std::string describe_kernel(const DeviceKernel &k) {
    std::ostringstream s;
    s << "== kernel " << k.name << " (threads " << k.threads[0] << " x " << k.threads[1] << " x "
      << k.threads[2] << ", shared " << k.shared_bytes << " bytes)\n  arguments:";
    for (const DeviceArgument &a : k.args) {
        s << " " << a.name << (a.is_buffer ? "[]" : "") << ":" << a.type;
        if (a.is_buffer) s << (a.read ? "r" : "") << (a.written ? "w" : "");
    }
    s << "\n" << k.body;
    return s.str();
}

} // namespace kiln
