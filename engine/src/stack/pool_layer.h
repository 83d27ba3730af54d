// The bottom of the engine's stack on a Pool: what reaches it is submitted to the pool as
// it is (it was prepared at the stack's door: Pool::submit would only prepare it again)
// and waited for, with the command's wait_tick if its caller set one. Admission is the
// pool's (its Scheduler grants slot, local slot, token and memory at once); `local` comes
// from the command (the launcher layer sets it). Thread-safe, as the Pool is.
#pragma once

#include "engine/src/stack/layer.h"
#include "spawnpool/pool.h"

namespace spawnpool::detail {

class PoolLayer : public Layer {
 public:
  /// `pool` must outlive the layer.
  explicit PoolLayer(Pool& pool) : pool_(pool) {}
  Result run(PreparedCommand& command) override;
  Pool& pool() const { return pool_; }

 private:
  Pool& pool_;
};

}  // namespace spawnpool::detail
