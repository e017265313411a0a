// Open MPI wrapper of include/anuvad/core/distributed.h; without ANUVAD_WITH_MPI every function
// is the single-process version.
#include "anuvad/core/distributed.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "anuvad/core/error.h"

#ifdef ANUVAD_WITH_MPI
#include <mpi.h>
#endif

namespace anuvad {

namespace {
int g_rank = 0;
int g_size = 1;
bool g_active = false;  ///< MPI_Init_thread was called by DistributedSession

/// True when a launcher (Open MPI's mpirun, PMIx or PMI) started this process.
bool launched_by_mpirun() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"})
    if (std::getenv(v) != nullptr) return true;
  return false;
}
}  // namespace

#ifdef ANUVAD_WITH_MPI

namespace {
/// Sends counts above INT_MAX in pieces (MPI counts are int).
template <class F>
void in_chunks(size_t n, const F& f) {
  constexpr size_t kChunk = size_t(1) << 30;
  for (size_t off = 0; off < n; off += kChunk) f(off, static_cast<int>(std::min(kChunk, n - off)));
}
template <class T>
void allreduce_impl(T* data, size_t n, MPI_Datatype type) {
  if (g_size <= 1) return;
  in_chunks(n, [&](size_t off, int count) {
    MPI_Allreduce(MPI_IN_PLACE, data + off, count, type, MPI_SUM, MPI_COMM_WORLD);
  });
}
template <class T>
void broadcast_impl(T* data, size_t n, MPI_Datatype type) {
  if (g_size <= 1) return;
  in_chunks(n, [&](size_t off, int count) { MPI_Bcast(data + off, count, type, 0, MPI_COMM_WORLD); });
}
}  // namespace

/// The MPI requests of an AsyncSums.
struct AsyncSums::Requests {
  std::vector<MPI_Request> pending;
  template <class T>
  void start(T* data, size_t n, MPI_Datatype type) {
    if (g_size <= 1) return;
    in_chunks(n, [&](size_t off, int count) {
      pending.emplace_back();
      MPI_Iallreduce(MPI_IN_PLACE, data + off, count, type, MPI_SUM, MPI_COMM_WORLD, &pending.back());
    });
  }
};

AsyncSums::AsyncSums() : requests_(std::make_unique<Requests>()) {}
AsyncSums::~AsyncSums() = default;
void AsyncSums::start(float* data, size_t n) { requests_->start(data, n, MPI_FLOAT); }
void AsyncSums::start(double* data, size_t n) { requests_->start(data, n, MPI_DOUBLE); }

bool AsyncSums::test() {
  std::vector<MPI_Request>& r = requests_->pending;
  if (r.empty()) return true;
  int done = 0;
  MPI_Testall(static_cast<int>(r.size()), r.data(), &done, MPI_STATUSES_IGNORE);
  if (done) r.clear();
  return done != 0;
}

void AsyncSums::wait() {
  std::vector<MPI_Request>& r = requests_->pending;
  if (!r.empty()) MPI_Waitall(static_cast<int>(r.size()), r.data(), MPI_STATUSES_IGNORE);
  r.clear();
}

size_t AsyncSums::in_flight() const { return requests_->pending.size(); }

DistributedSession::DistributedSession(int* argc, char*** argv) {
  if (!launched_by_mpirun()) return;
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  g_active = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
}

DistributedSession::~DistributedSession() {
  if (!g_active) return;
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  g_active = false;
}

bool mpi_compiled() { return true; }

void allreduce_sum(float* data, size_t n) { allreduce_impl(data, n, MPI_FLOAT); }
void allreduce_sum(double* data, size_t n) { allreduce_impl(data, n, MPI_DOUBLE); }
void broadcast(float* data, size_t n) { broadcast_impl(data, n, MPI_FLOAT); }
void broadcast(double* data, size_t n) { broadcast_impl(data, n, MPI_DOUBLE); }

void broadcast(std::string& bytes) {
  if (g_size <= 1) return;
  unsigned long long size = bytes.size();
  MPI_Bcast(&size, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
  bytes.resize(static_cast<size_t>(size));
  broadcast_impl(bytes.data(), bytes.size(), MPI_CHAR);
}

void barrier() {
  if (g_size > 1) MPI_Barrier(MPI_COMM_WORLD);
}

std::vector<std::string> gather_to_root(const std::string& bytes) {
  if (g_size <= 1) return {bytes};
  if (bytes.size() > static_cast<size_t>(INT_MAX))
    throw Error("rank " + std::to_string(g_rank) + ": " + std::to_string(bytes.size()) +
                " bytes to gather, more than MPI's int count allows; use smaller batches");
  int size = static_cast<int>(bytes.size());
  std::vector<int> sizes(static_cast<size_t>(g_size)), offsets(static_cast<size_t>(g_size), 0);
  MPI_Gather(&size, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::string all;
  if (g_rank == 0) {
    long long total = sizes[0];
    for (size_t r = 1; r < sizes.size(); ++r) {
      offsets[r] = offsets[r - 1] + sizes[r - 1];
      total += sizes[r];
      if (total > INT_MAX) throw Error("more than 2 GiB to gather on rank 0; use smaller batches");
    }
    all.resize(static_cast<size_t>(total));
  }
  MPI_Gatherv(bytes.data(), size, MPI_CHAR, all.data(), sizes.data(), offsets.data(), MPI_CHAR, 0,
              MPI_COMM_WORLD);
  std::vector<std::string> out;
  if (g_rank == 0)
    for (size_t r = 0; r < sizes.size(); ++r) out.push_back(all.substr(static_cast<size_t>(offsets[r]), static_cast<size_t>(sizes[r])));
  return out;
}

bool any_true(bool flag) {
  if (g_size <= 1) return flag;
  int v = flag ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
  return v != 0;
}

bool same_on_all_ranks(uint64_t value) {
  if (g_size <= 1) return true;
  unsigned long long lo = value, hi = value;
  MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
  return lo == hi;
}

void abort_all_ranks(int code) {
  if (g_active && g_size > 1) MPI_Abort(MPI_COMM_WORLD, code);
}

#else  // single-process versions

DistributedSession::DistributedSession(int*, char***) {
  (void)g_active;
  // N copies of one process would each train and write the same files: refuse.
  const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
  if (launched_by_mpirun() && size != nullptr && std::atoi(size) > 1) {
    std::fprintf(stderr, "anuvad: error: started by mpirun with %s ranks, but built without MPI (-DANUVAD_MPI=OFF)\n", size);
    std::exit(1);
  }
}
DistributedSession::~DistributedSession() = default;
bool mpi_compiled() { return false; }
void allreduce_sum(float*, size_t) {}
void allreduce_sum(double*, size_t) {}
void broadcast(float*, size_t) {}
void broadcast(double*, size_t) {}
void broadcast(std::string&) {}
void barrier() {}
std::vector<std::string> gather_to_root(const std::string& bytes) { return {bytes}; }
bool any_true(bool flag) { return flag; }
bool same_on_all_ranks(uint64_t) { return true; }
void abort_all_ranks(int) {}
struct AsyncSums::Requests {};
AsyncSums::AsyncSums() : requests_(std::make_unique<Requests>()) {}
AsyncSums::~AsyncSums() = default;
void AsyncSums::start(float*, size_t) {}
void AsyncSums::start(double*, size_t) {}
bool AsyncSums::test() { return true; }
void AsyncSums::wait() {}
size_t AsyncSums::in_flight() const { return 0; }

#endif

void broadcast(std::vector<std::string>& strings) {
  if (g_size <= 1) return;
  // Rank 0's strings as one buffer: a count, each length, then the bytes (host byte order).
  std::string bytes;
  const auto put = [&bytes](uint64_t v) { bytes.append(reinterpret_cast<const char*>(&v), sizeof v); };
  put(strings.size());
  for (const std::string& s : strings) put(s.size());
  for (const std::string& s : strings) bytes += s;
  broadcast(bytes);
  const auto get = [&bytes](size_t at) {
    uint64_t v = 0;
    std::memcpy(&v, bytes.data() + at, sizeof v);
    return static_cast<size_t>(v);
  };
  strings.resize(get(0));
  for (size_t i = 0, at = (1 + strings.size()) * 8; i < strings.size(); ++i) {
    const size_t length = get((1 + i) * 8);
    strings[i] = bytes.substr(at, length);
    at += length;
  }
}

int world_rank() { return g_rank; }
int world_size() { return g_size; }

}  // namespace anuvad
