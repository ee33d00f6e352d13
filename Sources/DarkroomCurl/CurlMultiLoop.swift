import CCurl
import CCurlShim
import DarkroomCore
import Foundation

/// One `curl_multi` loop on a dedicated thread: the transfers ``CurlTransferLoops`` hands it.
///
/// One multi handle means one connection cache (keep-alive reuse across transfers) and HTTP/2
/// multiplexing where the server offers it; one thread means no transfer ever blocks the
/// cooperative pool. The loop starts every transfer it is given: how many run at once is
/// ``CurlTransferLoops``' to decide. When one of its transfers ends, the loop asks for the next
/// waiting transfer and starts it in the same turn, the way `curl --parallel` does.
final class CurlMultiLoop: @unchecked Sendable {
  private let multi: UnsafeMutableRawPointer?
  /// What other threads hand to the loop thread. `active` and `ready` belong to the loop thread alone.
  private struct Queued {
    var incoming: [CurlTransfer] = []
    /// Transfers to cancel, by id: a cancellation that arrives just after its transfer ended must
    /// not keep the transfer (and its libcurl handle) alive until the loop next wakes up.
    var cancelled: Set<UInt64> = []
  }
  private let queued = Protected(Queued())
  private var active: [UnsafeMutableRawPointer: CurlTransfer] = [:]
  /// Called on the loop thread for each transfer that ended (or never started), with its
  /// outcome: the next waiting transfer, when it is to start on this loop.
  private let ended: @Sendable (CurlTransfer, CurlOutcome) -> CurlTransfer?

  /// Whether the loop has a multi handle (and a thread); one without is given no transfers.
  var isUsable: Bool { multi != nil }

  /// A loop named `name` (its thread's name), keeping at most `maxConnections` connections open
  /// after use (`CURLMOPT_MAXCONNECTS`).
  init(name: String, maxConnections: Int, ended: @escaping @Sendable (CurlTransfer, CurlOutcome) -> CurlTransfer?) {
    self.ended = ended
    _ = try? Curl.initialize()
    multi = dr_multi_new()
    if let multi {
      _ = dr_multi_setopt_long(multi, CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX))
      _ = dr_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, maxConnections)
    }
    guard multi != nil else { return }  // unusable: CurlTransferLoops fails its transfers itself
    let thread = Thread { [self] in run() }
    thread.name = name
    thread.start()
  }

  /// Hands a transfer (its continuation set) to the loop, which starts it on its next turn.
  func add(_ transfer: CurlTransfer) {
    queued.withLock { $0.incoming.append(transfer) }
    if let multi { dr_multi_wakeup(multi) }
  }

  /// Stops a transfer given to this loop: it ends as cancelled on the loop's next turn.
  func cancel(_ transfer: CurlTransfer) {
    queued.withLock { _ = $0.cancelled.insert(transfer.id) }
    if let multi { dr_multi_wakeup(multi) }
  }

  /// Outcomes whose callers are resumed once the loop holds no reference to their transfers, so
  /// a caller that wakes up sees its transfer (and libcurl handle) already gone.
  private var ready: [(CheckedContinuation<CurlOutcome, Never>, CurlOutcome)] = []

  /// Records a transfer's outcome, and takes the next waiting transfer in its place.
  private func finish(_ transfer: CurlTransfer, _ outcome: CurlOutcome) {
    if let continuation = transfer.continuation {
      transfer.continuation = nil
      ready.append((continuation, outcome))
    }
    // Started on this turn, without a wake-up.
    if let next = ended(transfer, outcome) { queued.withLock { $0.incoming.append(next) } }
  }

  private func resumeReady() {
    let resumptions = ready
    ready = []
    for (continuation, outcome) in resumptions { continuation.resume(returning: outcome) }
  }

  private func run() {
    guard let multi else { return }
    while true {
      startAndStop(on: multi)
      resumeReady()
      var stillRunning: Int32 = 0
      dr_multi_perform(multi, &stillRunning)
      var easy: UnsafeMutableRawPointer?
      var code = CURLE_OK
      while dr_multi_next_done(multi, &easy, &code) == 1 {
        guard let easy, let transfer = active.removeValue(forKey: easy) else { continue }
        dr_multi_remove(multi, easy)
        finish(transfer, transfer.outcome(code: code))
      }
      resumeReady()
      // Transfers that took the place of finished ones start at once: polling first would leave
      // them waiting for socket activity, or for the poll's whole timeout once every running
      // transfer is done.
      if queued.withLock({ $0.incoming.isEmpty }) { dr_multi_poll(multi, 1000) }
    }
  }

  /// Starts the transfers handed in, and removes the cancelled ones. The queues taken here let go
  /// of their transfers before the loop blocks in curl_multi_poll.
  private func startAndStop(on multi: UnsafeMutableRawPointer) {
    let (added, removed) = queued.withLock { queued -> ([CurlTransfer], Set<UInt64>) in
      defer {
        queued.incoming = []
        queued.cancelled = []
      }
      return (queued.incoming, queued.cancelled)
    }
    for transfer in added {
      if transfer.isCancelled || removed.contains(transfer.id) {
        finish(transfer, transfer.outcome(code: CURLE_ABORTED_BY_CALLBACK, cancelled: true))
      } else if start(transfer, on: multi) {
        active[transfer.easy] = transfer
      } else {
        finish(transfer, transfer.outcome(code: CURLE_FAILED_INIT))
      }
    }
    guard !removed.isEmpty else { return }
    for (easy, transfer) in active where removed.contains(transfer.id) {
      active.removeValue(forKey: easy)
      dr_multi_remove(multi, easy)
      finish(transfer, transfer.outcome(code: CURLE_ABORTED_BY_CALLBACK, cancelled: true))
    }
  }

  /// Adds a transfer to the multi handle, waiting for a multiplexed connection where
  /// ``CurlTransferLoops`` says so; false when libcurl refuses it.
  private func start(_ transfer: CurlTransfer, on multi: UnsafeMutableRawPointer) -> Bool {
    _ = dr_setopt_long(transfer.easy, CURLOPT_PIPEWAIT, transfer.waitsForMultiplexing ? 1 : 0)
    return dr_multi_add(multi, transfer.easy) == CURLM_OK
  }
}
