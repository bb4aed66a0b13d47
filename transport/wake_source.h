// How a backend whose links have no descriptor to poll (shared memory rings a futex)
// lets the Fabric sleep until one of its links may progress. A backend's connect hands
// one to the Fabric; the Fabric never knows which backend it is.
#pragma once

namespace kolo {

class WakeSource {
 public:
  virtual ~WakeSource() = default;
  // Called before every progress pass: notes the state, so that a wake-up that comes
  // between the pass and sleep() is not lost.
  virtual void arm() = 0;
  // Sleeps until a link of this source may progress (or something it noted changed), at
  // most timeout_ms.
  virtual void sleep(int timeout_ms) = 0;
  // From any thread (kolo_comm_abort): the source's waits return now, and later ones fail.
  virtual void abort() = 0;
};

}  // namespace kolo
