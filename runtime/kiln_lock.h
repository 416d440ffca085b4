// A scoped pthread mutex lock for the runtime's own files: the runtime does not use the C++
// library (std::mutex would pull in libstdc++), so a C program links it with libc and OpenMP.
#pragma once

#include <pthread.h>

namespace kiln_runtime_internal {

class Lock {
public:
    explicit Lock(pthread_mutex_t &m) : m(m) { pthread_mutex_lock(&m); }
    ~Lock() { pthread_mutex_unlock(&m); }
    Lock(const Lock &) = delete;
    Lock &operator=(const Lock &) = delete;

private:
    pthread_mutex_t &m;
};

} // namespace kiln_runtime_internal
