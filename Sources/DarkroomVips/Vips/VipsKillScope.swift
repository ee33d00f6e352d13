import CVips
import CVipsShim
import DarkroomCore
import Foundation

/// Stops libvips work in progress when the task that asked for it is cancelled (a time limit, a
/// client that hung up).
///
/// While a stage's blocking work runs in a scope, every image made on that thread is noted; when
/// the task is cancelled, libvips' kill flag is set on all of them and on the stage's inputs, so
/// that any computation pulling pixels through them (a load, a smart crop's analysis, a resize,
/// an encode) fails at its next tile instead of running to its end. The images are released when
/// the work returns.
package final class VipsKillScope: Sendable {
  private struct State {
    var images: [VipsImage] = []
    var killed = false
    var finished = false
  }
  private let state = Protected(State())

  private static let key: pthread_key_t = {
    var key = pthread_key_t()
    pthread_key_create(&key, nil)
    return key
  }()

  /// Runs `work` on the context's blocking pool, in a scope that kills its images (and
  /// `inputs`) when the calling task is cancelled.
  package static func blocking<T: Sendable>(
    _ context: StageContext, inputs: [VipsImage] = [], _ work: @escaping @Sendable () throws -> T
  ) async throws -> T {
    let scope = VipsKillScope()
    scope.state.withLock { $0.images = inputs }
    return try await withTaskCancellationHandler {
      try await context.blocking {
        pthread_setspecific(key, Unmanaged.passUnretained(scope).toOpaque())
        defer {
          pthread_setspecific(key, nil)
          scope.finish()
        }
        return try work()
      }
    } onCancel: {
      scope.kill()
    }
  }

  /// Notes an image made on this thread, when the thread runs in a scope.
  static func noteMade(_ image: VipsImage) {
    guard let raw = pthread_getspecific(key) else { return }
    let scope = Unmanaged<VipsKillScope>.fromOpaque(raw).takeUnretainedValue()
    let killNow = scope.state.withLock { state -> Bool in
      guard !state.finished else { return false }
      if !state.killed { state.images.append(image) }
      return state.killed
    }
    if killNow { image.kill() }
  }

  private func kill() {
    let images = state.withLock { state -> [VipsImage] in
      guard !state.finished else { return [] }
      state.killed = true
      return state.images
    }
    for image in images { image.kill() }
  }

  private func finish() {
    // Released outside the lock: the last reference to an image runs its deinit.
    let images = state.withLock { state -> [VipsImage] in
      state.finished = true
      defer { state.images = [] }
      return state.images
    }
    _ = images
  }
}
