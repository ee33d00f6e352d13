import Darkroom
import Foundation

extension ImageServer {
  /// How long a request waits for another instance's render before rendering itself.
  static let clusterWaitLimit: Duration = .seconds(30)
  /// How long the shared cache is skipped after it could not be reached.
  static let sharedAwayFor: Duration = .seconds(5)
  /// How often a waiter looks again when no release wakes it (a failed render notifies no one).
  static let clusterPoll: Duration = .milliseconds(250)

  /// The answer for `key` with the cluster's help: from the shared cache, or rendered here while
  /// holding the cluster's claim on the key (and shared), or, when another instance holds the
  /// claim, read from the shared cache once that instance is done. When the shared cache cannot
  /// be reached, or another instance takes too long, the instance renders on its own.
  func clusterRender(
    key: String, shared: any SharedResultStore, render: @escaping @Sendable () async throws -> ServedImage
  ) async throws -> ServedImage {
    if let away = sharedAwayUntil.value, ContinuousClock.now < away {
      metrics.shared(.unavailable)
      return try await render()
    }
    let deadline = ContinuousClock.now + Self.clusterWaitLimit
    var waited = false
    let rendered = Protected<ServedImage?>(nil)
    while true {
      do {
        if let hit = try await shared.result(forKey: key) {
          metrics.shared(waited ? .waited : .hit)
          let served = ServedImage(
            image: EncodedImage(
              source: ImageSource(key), bytes: ImageBytes(hit.bytes), format: hit.format, width: hit.width, height: hit.height),
            expiresAt: hit.expiresAt)
          cache?.remember(served, key: key)
          return served
        }
        let claimed = try await shared.withRenderClaim(forKey: key) {
          let served = try await render()
          rendered.withLock { $0 = served }
          guard !served.isPrivate, served.expiresAt > Date() else { return }
          let image = served.image
          try await shared.store(
            SharedResult(
              bytes: image.bytes.withUnsafeBytes { Array($0) }, format: image.format, width: image.width, height: image.height,
              expiresAt: served.expiresAt), forKey: key)
        }
        if claimed, let served = rendered.value {
          metrics.shared(.rendered)
          return served
        }
      } catch let error as PipelineError where error.code == .queueUnavailable {
        logger.warning("the shared cache is away; rendering here alone", metadata: ["error": "\(error.message)"])
        sharedAwayUntil.withLock { $0 = ContinuousClock.now + Self.sharedAwayFor }
        metrics.shared(.unavailable)
        // A render that finished before its result could be shared still answers.
        if let served = rendered.value { return served }
        return try await render()
      }
      if let served = rendered.value { return served }
      if ContinuousClock.now >= deadline { return try await render() }
      waited = true
      await shared.waitForResult(forKey: key, timeout: Self.clusterPoll)
    }
  }
}
