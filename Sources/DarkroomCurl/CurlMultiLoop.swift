import CCurl
import CCurlShim
import DarkroomCore
import Foundation

/// Drives every HTTP transfer of the process from one `curl_multi` loop on a dedicated thread.
///
/// One multi handle means one connection cache (keep-alive reuse across transfers) and HTTP/2
/// multiplexing where the server offers it; one thread means no transfer ever blocks the
/// cooperative pool. Callers hand a transfer in with ``perform(_:)`` and suspend until it ends;
/// cancelling the calling task removes the transfer from the loop promptly.
final class CurlMultiLoop: @unchecked Sendable {
  /// The process-wide loop.
  static let shared = CurlMultiLoop()

  private let multi: UnsafeMutableRawPointer?
  /// What callers hand to the loop thread. `active` and `ready` belong to the loop thread alone.
  private struct Queued {
    var incoming: [CurlTransfer] = []
    /// Transfers to cancel, by id: a cancellation that arrives just after its transfer ended must
    /// not keep the transfer (and its libcurl handle) alive until the loop next wakes up.
    var cancelled: Set<UInt64> = []
    var limit = 64
  }
  private let queued = Protected(Queued())
  private var active: [UnsafeMutableRawPointer: CurlTransfer] = [:]
  /// Which origins speak HTTP/2, for CURLOPT_PIPEWAIT (the loop thread's alone).
  private var origins = OriginProtocols()

  private init() {
    _ = try? Curl.initialize()
    multi = dr_multi_new()
    if let multi {
      _ = dr_multi_setopt_long(multi, CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX))
      _ = dr_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, 64)
    }
    let thread = Thread { [self] in run() }
    thread.name = "darkroom.curl"
    thread.start()
  }

  /// The most transfers that run at once; more wait in order (the runner's `--fetch-concurrency`).
  var maxConcurrentTransfers: Int {
    get { queued.withLock { $0.limit } }
    set {
      queued.withLock { $0.limit = max(1, newValue) }
      if let multi { dr_multi_wakeup(multi) }
    }
  }

  /// Runs a transfer to its end.
  func perform(_ transfer: CurlTransfer) async -> CurlOutcome {
    guard multi != nil else { return transfer.outcome(code: CURLE_FAILED_INIT) }
    return await withTaskCancellationHandler {
      await withCheckedContinuation { (continuation: CheckedContinuation<CurlOutcome, Never>) in
        transfer.continuation = continuation
        queued.withLock { $0.incoming.append(transfer) }
        if let multi { dr_multi_wakeup(multi) }
      }
    } onCancel: {
      transfer.cancel()
      queued.withLock { _ = $0.cancelled.insert(transfer.id) }
      if let multi { dr_multi_wakeup(multi) }
    }
  }

  /// Outcomes whose callers are resumed once the loop holds no reference to their transfers, so
  /// a caller that wakes up sees its transfer (and libcurl handle) already gone.
  private var ready: [(CheckedContinuation<CurlOutcome, Never>, CurlOutcome)] = []

  private func finish(_ transfer: CurlTransfer, _ outcome: CurlOutcome) {
    guard let continuation = transfer.continuation else { return }
    transfer.continuation = nil
    ready.append((continuation, outcome))
  }

  private func resumeReady() {
    let resumptions = ready
    ready = []
    for (continuation, outcome) in resumptions { continuation.resume(returning: outcome) }
  }

  private func run() {
    guard let multi else { return }  // perform() fails every transfer itself
    while true {
      // In its own scope, so that the queues taken here let go of their transfers before the
      // loop blocks in curl_multi_poll.
      do {
        let running = active.count
        let (added, removed) = queued.withLock { queued -> ([CurlTransfer], Set<UInt64>) in
          let removed = queued.cancelled
          queued.cancelled = []
          // Cancelled transfers still waiting leave the queue at once; the rest start in order
          // while there is room under the limit.
          queued.incoming.removeAll { transfer in
            guard removed.contains(transfer.id) else { return false }
            finish(transfer, transfer.outcome(code: CURLE_ABORTED_BY_CALLBACK, cancelled: true))
            return true
          }
          let room = max(0, queued.limit - running)
          let added = Array(queued.incoming.prefix(room))
          queued.incoming.removeFirst(added.count)
          return (added, removed)
        }
        for transfer in added {
          if transfer.isCancelled {
            finish(transfer, transfer.outcome(code: CURLE_ABORTED_BY_CALLBACK, cancelled: true))
          } else if start(transfer, on: multi) {
            active[transfer.easy] = transfer
          } else {
            finish(transfer, transfer.outcome(code: CURLE_FAILED_INIT))
          }
        }
        if !removed.isEmpty {
          for (easy, transfer) in active where removed.contains(transfer.id) {
            active.removeValue(forKey: easy)
            dr_multi_remove(multi, easy)
            finish(transfer, transfer.outcome(code: CURLE_ABORTED_BY_CALLBACK, cancelled: true))
          }
        }
      }
      resumeReady()
      var stillRunning: Int32 = 0
      dr_multi_perform(multi, &stillRunning)
      var easy: UnsafeMutableRawPointer?
      var code = CURLE_OK
      while dr_multi_next_done(multi, &easy, &code) == 1 {
        guard let easy, let transfer = active.removeValue(forKey: easy) else { continue }
        dr_multi_remove(multi, easy)
        let outcome = transfer.outcome(code: code)
        if let effective = outcome.effectiveURL { origins.record(effective, httpVersion: outcome.httpVersion) }
        finish(transfer, outcome)
      }
      resumeReady()
      dr_multi_poll(multi, 1000)
    }
  }
}

extension CurlMultiLoop {
  /// Adds a transfer to the multi handle, waiting for a multiplexed connection only where the
  /// origin speaks (or may speak) HTTP/2; false when libcurl refuses it.
  fileprivate func start(_ transfer: CurlTransfer, on multi: UnsafeMutableRawPointer) -> Bool {
    let waits = origins.waitsForMultiplexing(transfer.url)
    _ = dr_setopt_long(transfer.easy, CURLOPT_PIPEWAIT, waits ? 1 : 0)
    return dr_multi_add(multi, transfer.easy) == CURLM_OK
  }
}
