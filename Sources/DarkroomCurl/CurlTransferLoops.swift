import CCurl
import CCurlShim
import DarkroomCore
import DequeModule
import Foundation

/// Runs every HTTP transfer of the process on a few ``CurlMultiLoop``s, under one limit.
///
/// A transfer's bytes cross the kernel twice (received, then written into a file or copied into
/// memory), and on one loop thread that copying is one core's work: `curl --parallel` is held to
/// one core the same way. With a loop per core (at most four), transfers are spread over the
/// cores, each loop keeping its own connections alive. A new transfer goes to the loop its
/// origin's last transfer ran on, for the connection left open there, while that loop runs fewer
/// than its share of the limit; else to the loop with the fewest transfers (the first among
/// equals). So one transfer at a time keeps to one loop, a burst to one origin is spread evenly,
/// and a second loop starts only once the first has its share.
///
/// A connection belongs to one loop, so transfers that may share one stay together: every
/// transfer to an origin that may speak HTTP/2 (``OriginProtocols``) goes to the loop that already
/// runs that origin's transfers, and waits there for the multiplexed connection.
///
/// At most ``maxConcurrentTransfers`` run at once across the loops; more wait, in the order they
/// were asked, and the loop whose transfer ended starts the next one in the same turn. A caller
/// cancelled while its transfer waits is released at once; one cancelled while its transfer runs
/// is released when its loop has removed the transfer.
///
/// ```swift
/// CurlTransferLoops.shared.maxConcurrentTransfers = 8
/// let outcome = await CurlTransferLoops.shared.perform(transfer)
/// ```
final class CurlTransferLoops: Sendable {
  /// The process-wide loops.
  static let shared = CurlTransferLoops(maxLoops: min(4, ProcessInfo.processInfo.activeProcessorCount))

  private struct State {
    var limit = 64
    var running = 0
    var loops: [CurlMultiLoop] = []
    /// Transfers running (or about to) on each loop, by the loop's index.
    var load: [Int] = []
    /// Transfers waiting for room under the limit, in order.
    var waiting: Deque<CurlTransfer> = []
    /// Each running transfer's loop, and its origin when it may multiplex, by transfer id.
    var placed: [UInt64: (loop: Int, multiplexed: String?)] = [:]
    /// The loop of each origin whose running transfers may multiplex, and how many run there.
    var multiplexing: [String: (loop: Int, count: Int)] = [:]
    /// The loop each origin's last transfer was placed on (at most ``maxRemembered`` origins).
    var lastLoop: [String: Int] = [:]
    var origins = OriginProtocols()
  }
  private let state = Protected(State())
  private let maxLoops: Int
  /// Connections kept open after use, over all loops.
  static let maxIdleConnections = 64
  /// Origins whose last loop is remembered; past that the memory starts again.
  static let maxRemembered = 1024

  /// What became of a transfer asked for.
  private enum Admission {
    case placed(CurlMultiLoop)
    case waiting
    case cancelled
  }

  init(maxLoops: Int) {
    self.maxLoops = max(1, maxLoops)
  }

  /// The most transfers that run at once; more wait in order (the runner's `--fetch-concurrency`).
  var maxConcurrentTransfers: Int {
    get { state.withLock { $0.limit } }
    set {
      let admitted = state.withLock { state -> [(CurlMultiLoop, CurlTransfer)] in
        state.limit = max(1, newValue)
        var admitted: [(CurlMultiLoop, CurlTransfer)] = []
        while state.running < state.limit, let transfer = state.waiting.popFirst() {
          admitted.append((place(transfer, in: &state), transfer))
        }
        return admitted
      }
      for (loop, transfer) in admitted { start(transfer, on: loop) }
    }
  }

  /// The loops started so far, the transfers running and those waiting (for tests and
  /// diagnostics).
  var loopCount: Int { state.withLock { $0.loops.count } }
  var runningCount: Int { state.withLock { $0.running } }
  var waitingCount: Int { state.withLock { $0.waiting.count } }

  /// Runs a transfer to its end.
  func perform(_ transfer: CurlTransfer) async -> CurlOutcome {
    await withTaskCancellationHandler {
      await withCheckedContinuation { (continuation: CheckedContinuation<CurlOutcome, Never>) in
        transfer.continuation = continuation
        // Read under the lock that the cancellation handler takes after setting it: a transfer
        // cancelled before it got here does not wait for its turn to end.
        let admission = state.withLock { state -> Admission in
          if transfer.isCancelled { return .cancelled }
          guard state.running < state.limit else {
            state.waiting.append(transfer)
            return .waiting
          }
          return .placed(place(transfer, in: &state))
        }
        switch admission {
        case .placed(let loop): start(transfer, on: loop)
        case .cancelled:
          transfer.continuation = nil
          continuation.resume(returning: transfer.outcome(code: CURLE_ABORTED_BY_CALLBACK, cancelled: true))
        case .waiting: break
        }
      }
    } onCancel: {
      transfer.cancel()
      let (waited, loop) = state.withLock { state -> (Bool, CurlMultiLoop?) in
        if let index = state.waiting.firstIndex(where: { $0 === transfer }) {
          state.waiting.remove(at: index)
          return (true, nil)
        }
        return (false, state.placed[transfer.id].map { state.loops[$0.loop] })
      }
      if waited, let continuation = transfer.continuation {
        transfer.continuation = nil
        continuation.resume(returning: transfer.outcome(code: CURLE_ABORTED_BY_CALLBACK, cancelled: true))
      }
      loop?.cancel(transfer)
    }
  }

  /// Gives a placed transfer to its loop, or fails it at once where libcurl had no multi handle
  /// to give (with every waiting transfer that takes its place there).
  private func start(_ transfer: CurlTransfer, on loop: CurlMultiLoop) {
    var placed: (CurlMultiLoop, CurlTransfer)? = (loop, transfer)
    while let (loop, transfer) = placed {
      if loop.isUsable { return loop.add(transfer) }
      if let continuation = transfer.continuation {
        transfer.continuation = nil
        continuation.resume(returning: transfer.outcome(code: CURLE_FAILED_INIT))
      }
      placed = next(after: transfer, outcome: nil).map { ($0.loop, $0.transfer) }
    }
  }

  /// Counts `transfer` running on a loop: that of its origin's running transfers when it may
  /// multiplex; else its origin's last loop while that loop has less than its share of the limit;
  /// else the one with the fewest transfers (a new loop when every one has some and there may be
  /// more).
  private func place(
    _ transfer: CurlTransfer, in state: inout State, preferring preferred: Int? = nil
  ) -> CurlMultiLoop {
    let origin = state.origins.multiplexingOrigin(transfer.url)
    transfer.waitsForMultiplexing = origin != nil
    let key = Self.originKey(transfer.url)
    let share = max(1, (state.limit + maxLoops - 1) / maxLoops)
    let chosen =
      origin.flatMap { state.multiplexing[$0]?.loop }
      ?? state.lastLoop[key].flatMap { state.load[$0] < share ? $0 : nil }
      ?? leastLoaded(&state, preferring: preferred)
    if state.lastLoop.count >= Self.maxRemembered, state.lastLoop[key] == nil { state.lastLoop = [:] }
    state.lastLoop[key] = chosen
    if let origin { state.multiplexing[origin, default: (chosen, 0)].count += 1 }
    state.running += 1
    state.load[chosen] += 1
    state.placed[transfer.id] = (chosen, origin)
    return state.loops[chosen]
  }

  /// `scheme://authority` of a URL as written, without parsing it: where a connection to it may
  /// be open (spellings of one origin that differ are only more keys).
  ///
  /// Read on the UTF-8 bytes: Foundation's `range(of:)` bridged every URL to `NSString`.
  static func originKey(_ url: String) -> String {
    let bytes = url.utf8
    let colon = UInt8(ascii: ":")
    let slash = UInt8(ascii: "/")
    var index = bytes.startIndex
    while index != bytes.endIndex {
      let next = bytes.index(after: index)
      if bytes[index] == colon, bytes[next...].starts(with: [slash, slash]) { break }
      index = next
    }
    guard index != bytes.endIndex else { return url }
    let authority = bytes[bytes.index(index, offsetBy: 3)...]
    let end =
      authority.firstIndex { $0 == slash || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") } ?? authority.endIndex
    return String(url[..<end])
  }

  /// The index of the loop with the fewest transfers (`preferred` among equals: the loop whose
  /// transfer just ended), or of a new loop when every one has some and there may be more.
  private func leastLoaded(_ state: inout State, preferring preferred: Int?) -> Int {
    if var index = state.load.indices.min(by: { state.load[$0] < state.load[$1] }),
      state.load[index] == 0 || state.loops.count == maxLoops
    {
      if let preferred, state.load[preferred] == state.load[index] { index = preferred }
      return index
    }
    // The process keeps at most 64 connections open after use, as with one loop.
    let connections = max(16, Self.maxIdleConnections / maxLoops)
    let loop = CurlMultiLoop(name: "darkroom.curl.\(state.loops.count)", maxConnections: connections) {
      [weak self] transfer, outcome in
      guard let self, let next = self.next(after: transfer, outcome: outcome) else { return nil }
      if next.sameLoop { return next.transfer }
      self.start(next.transfer, on: next.loop)
      return nil
    }
    state.loops.append(loop)
    state.load.append(0)
    return state.loops.count - 1
  }

  /// Called for each transfer that ended on its loop (or never started): the next waiting
  /// transfer and the loop it is now placed on (the same loop when it can), if one waits. The
  /// HTTP version the transfer used is remembered for its origin.
  private func next(
    after transfer: CurlTransfer, outcome: CurlOutcome?
  ) -> (sameLoop: Bool, loop: CurlMultiLoop, transfer: CurlTransfer)? {
    state.withLock { state in
      if let outcome, let effective = outcome.effectiveURL {
        state.origins.record(effective, httpVersion: outcome.httpVersion)
      }
      guard let (index, origin) = state.placed.removeValue(forKey: transfer.id) else { return nil }
      if let origin, let entry = state.multiplexing[origin] {
        state.multiplexing[origin] = entry.count > 1 ? (entry.loop, entry.count - 1) : nil
      }
      state.load[index] -= 1
      state.running -= 1
      guard state.running < state.limit, let next = state.waiting.popFirst() else { return nil }
      let loop = place(next, in: &state, preferring: index)
      return (loop === state.loops[index], loop, next)
    }
  }
}
