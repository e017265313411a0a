// Data-parallel processes on Open MPI (issue #17): who this process is among the ranks of an
// `mpirun` job, and the few collectives training needs. MPI is initialised only when the
// process was launched by mpirun (OMPI_COMM_WORLD_SIZE / PMIX_RANK / PMI_RANK in the
// environment); otherwise, and in a build without MPI (cmake -DANUVAD_MPI=OFF), every function
// below is its single-process version: rank 0 of 1, collectives return their input.
// Only the main thread calls these (MPI_THREAD_FUNNELED).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace anuvad {

/// Initialises MPI for the lifetime of the object when launched by mpirun (and the build has
/// MPI); a no-op otherwise. On destruction, waits for every rank (barrier) and finalises, so
/// that no rank exits while another still writes. Create one, first thing in main().
class DistributedSession {
 public:
  DistributedSession(int* argc, char*** argv);
  ~DistributedSession();
  DistributedSession(const DistributedSession&) = delete;
  DistributedSession& operator=(const DistributedSession&) = delete;
};

/// True when this binary was built with MPI support (`anuvad --version` lists it).
bool mpi_compiled();
/// This process's rank in [0, world_size()); 0 without MPI.
int world_rank();
/// Number of ranks of the job; 1 without MPI.
int world_size();
/// True on rank 0, the rank that reads, logs, validates and writes files.
inline bool is_root_rank() { return world_rank() == 0; }

/// In-place element-wise sum over all ranks of data[0..n) (MPI_Allreduce, MPI_SUM): every
/// rank gets the same sums. A no-op with one rank.
void allreduce_sum(float* data, size_t n);
void allreduce_sum(double* data, size_t n);
/// In-place element-wise sums over all ranks started without waiting (MPI_Iallreduce, MPI_SUM),
/// so that computation can go on while they travel; every rank must start the same sums (the
/// same sizes) in the same order. Open MPI moves them on only inside MPI calls (test() lets it).
/// The buffers must stay untouched until wait() returns. With one rank (or without MPI) start()
/// does nothing: the data already is its sum. The destructor does not wait: an error that
/// leaves sums in flight ends the job through main's abort_all_ranks (MPI forbids cancelling
/// them).
class AsyncSums {
 public:
  AsyncSums();
  ~AsyncSums();
  AsyncSums(const AsyncSums&) = delete;
  AsyncSums& operator=(const AsyncSums&) = delete;
  /// Starts the sum of data[0..n) over all ranks (in pieces of at most 2^30 elements).
  void start(float* data, size_t n);
  void start(double* data, size_t n);
  /// Lets MPI progress the started sums without blocking (MPI_Testall); true when all are done.
  bool test();
  /// Returns when every started sum is complete (MPI_Waitall); then none is in flight.
  void wait();
  /// Sums started and not yet known to be complete.
  size_t in_flight() const;

 private:
  struct Requests;
  std::unique_ptr<Requests> requests_;
};

/// Copies rank 0's data[0..n) to every rank (MPI_Bcast). A no-op with one rank.
void broadcast(float* data, size_t n);
void broadcast(double* data, size_t n);
/// Rank 0's `bytes` on every rank (the size is sent first). A no-op with one rank.
void broadcast(std::string& bytes);
/// Rank 0's list of strings on every rank (one broadcast of their lengths and bytes). A no-op
/// with one rank.
void broadcast(std::vector<std::string>& strings);
/// Every rank's `bytes`, in rank order, on rank 0 (MPI_Gatherv); an empty vector on the other
/// ranks; {bytes} with one rank. Throws Error when a rank's bytes or their total exceed 2 GiB
/// − 1 (MPI's int counts; that rank then ends the job through main's abort_all_ranks).
std::vector<std::string> gather_to_root(const std::string& bytes);
/// Returns when every rank has called it (MPI_Barrier); at once with one rank.
void barrier();
/// True on every rank when `flag` is true on any rank (a logical-or allreduce).
bool any_true(bool flag);
/// True on every rank when `value` is the same on every rank (min == max allreduce).
bool same_on_all_ranks(uint64_t value);
/// Ends every rank of the job with `code` (MPI_Abort) when there are several ranks, so that
/// no rank waits forever in a collective after another failed; returns without MPI.
void abort_all_ranks(int code);

}  // namespace anuvad
