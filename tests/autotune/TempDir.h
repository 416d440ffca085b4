// A fresh directory under /tmp for one test, removed with everything in it at the end.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

namespace kiln::autotune_test {

class TempDir {
public:
    TempDir() {
        char tmpl[] = "/tmp/kiln-autotune-test-XXXXXX";
        path = mkdtemp(tmpl);
    }
    ~TempDir() { std::filesystem::remove_all(path); }
    std::string operator/(const std::string &name) const { return path + "/" + name; }
    std::string path;
};

} // namespace kiln::autotune_test
