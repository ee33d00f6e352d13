import ArgumentParser
import Darkroom
import DarkroomCore

/// libvips' start (loading its modules takes 10–20 ms) on a thread of its own, so that a command
/// reaches its queue meanwhile instead of after it: the work waits for it with ``ready()``.
struct VipsStart: Sendable {
  private let task: Task<String?, Never>

  init(threads: Int) {
    task = Task {
      do {
        try await BlockingPool.shared.run { try Darkroom.bootstrap(vipsConcurrency: threads) }
        return nil
      } catch {
        return (error as? PipelineError)?.message ?? "\(error)"
      }
    }
  }

  /// Waits until libvips has started; exits 1, saying why, when it could not.
  func ready() async throws {
    guard let failure = await task.value else { return }
    Terminal.error("error: \(failure)")
    throw ExitCode.failure
  }
}
