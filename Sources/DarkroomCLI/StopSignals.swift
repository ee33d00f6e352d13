import Darkroom
import Dispatch
import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// SIGINT and SIGTERM during a batch: the first stops new images from starting while the ones in
/// flight finish; the second cancels those in flight (their temporary files are removed and the
/// summary is printed); a third exits at once.
///
/// Signals are received by dispatch sources (not in a signal handler), so what follows a signal is
/// ordinary code. The exit status of a stopped run is 128 + the signal's number, as a shell
/// reports a process killed by it.
///
/// ```swift
/// let signals = StopSignals()
/// signals.onCancel { task.cancel() }
/// if signals.stopRequested { … }
/// ```
final class StopSignals: Sendable {
  private struct State {
    var received: [Int32] = []
    var cancelHandlers: [@Sendable () -> Void] = []
    var sources: [any DispatchSourceSignal] = []
  }
  private let state = Protected(State())
  private let queue = DispatchQueue(label: "darkroom.signals")
  /// A pipe written to at the first signal: a blocking read waits on its read end too (``wakeup``).
  private let pipeEnds: (read: Int32, write: Int32)?

  /// A descriptor that becomes readable at the first signal, for code that blocks in `poll(2)`
  /// (reading an input list from a writer that never writes); `nil` when no pipe could be made.
  var wakeup: Int32? { pipeEnds?.read }

  /// Starts listening; the signals' default actions are off until ``stop()``.
  init() {
    var ends: [Int32] = [-1, -1]
    if pipe(&ends) == 0 {
      for end in ends {
        _ = fcntl(end, F_SETFD, FD_CLOEXEC)
        _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
      }
      pipeEnds = (ends[0], ends[1])
    } else {
      pipeEnds = nil
    }
    state.withLock { state in
      for number in [SIGINT, SIGTERM] {
        signal(number, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
        // Signals that arrive together are one event: `data` says how many came.
        source.setEventHandler { [weak self] in  // cancelling the source (stop) releases it
          for _ in 0..<max(1, Int(clamping: source.data)) { self?.receive(number) }
        }
        source.resume()
        state.sources.append(source)
      }
    }
  }

  /// Whether a first signal asked the batch to start nothing new.
  var stopRequested: Bool { state.withLock { !$0.received.isEmpty } }

  /// Whether a second signal cancelled the images in flight.
  var cancelRequested: Bool { state.withLock { $0.received.count >= 2 } }

  /// The exit status for the first signal received (130 for SIGINT, 143 for SIGTERM), if any.
  var exitStatus: Int32? { state.withLock { state in state.received.first.map { 128 + $0 } } }

  /// Runs `handler` on the second signal (at once when it already came).
  func onCancel(_ handler: @escaping @Sendable () -> Void) {
    let now = state.withLock { state -> Bool in
      if state.received.count >= 2 { return true }
      state.cancelHandlers.append(handler)
      return false
    }
    if now { handler() }
  }

  /// Stops listening and gives SIGINT and SIGTERM their default actions back.
  func stop() {
    let ended = state.withLock { state -> [any DispatchSourceSignal] in
      defer { state.sources = [] }
      return state.sources
    }
    for source in ended { source.cancel() }
    signal(SIGINT, SIG_DFL)
    signal(SIGTERM, SIG_DFL)
  }

  private func receive(_ number: Int32) {
    let (count, handlers) = state.withLock { state -> (Int, [@Sendable () -> Void]) in
      state.received.append(number)
      guard state.received.count == 2 else { return (state.received.count, []) }
      defer { state.cancelHandlers = [] }
      return (state.received.count, state.cancelHandlers)
    }
    if count == 1, let write = pipeEnds?.write {
      var byte: UInt8 = 1
      _ = Glibc.write(write, &byte, 1)
    }
    switch count {
    case 1:
      if Terminal.stderrIsTerminal { Terminal.status("") }  // clears a progress line; no escapes into logs
      Terminal.error("stopping: no new images start; the ones in flight finish (signal again to cancel them)")
    case 2:
      if Terminal.stderrIsTerminal { Terminal.status("") }
      Terminal.error("stopping: cancelling the images in flight (signal again to exit at once)")
      for handler in handlers { handler() }
    default:
      Terminal.error("stopped at once")
      AtomicFile.removeTemporaries(forGood: true)
      _exit(128 + number)
    }
  }
}
