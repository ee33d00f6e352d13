import Darkroom
import Foundation

extension ImageServer {
  /// How long a request waits for another instance's render before rendering itself.
  static let clusterWaitLimit: Duration = .seconds(30)
  /// How long the shared cache is skipped after it could not be reached: an outage costs one
  /// request the store's time limit now and then, not every request.
  static let sharedAwayFor: Duration = .seconds(15)
  /// How often a waiter looks for the result while no claim's end has woken it.
  static let clusterPoll: Duration = .milliseconds(250)

  /// The answer for `key` with the cluster's help: from the shared cache; or rendered here
  /// holding the cluster's claim on the key (taken only once admitted, so that claims never wait
  /// in the admission queue) and shared; or, when another instance holds the claim, read from the
  /// shared cache once that instance is done. When the other instance's render failed for a
  /// reason of the source's (``sharedFailure(_:_:)``: not found, corrupt, too large…), this request fails
  /// the same way without fetching; when it failed otherwise, was not shared, or takes too long,
  /// or when the shared cache cannot be reached, the instance renders on its own.
  ///
  /// `render` renders without the admission gate; this function admits it.
  func clusterRender(
    key: String, shared: any SharedResultStore, render: @escaping @Sendable () async throws -> ServedImage
  ) async throws -> ServedImage {
    let rendered = Protected<ServedImage?>(nil)
    if let away = sharedAwayUntil.value, ContinuousClock.now < away {
      metrics.shared(.unavailable)
      return try await gate.admitted { try await render() }
    }
    do {
      if let hit = try await shared.result(forKey: key) { return answer(hit, key: key, outcome: .hit) }
      let fromShared = Protected(false)
      let claimed = try await gate.admitted {
        try await shared.withRenderClaim(forKey: key) {
          // Stored by another instance while this request waited for admission: no render.
          if let hit = try await shared.result(forKey: key) {
            rendered.withLock { $0 = self.answer(hit, key: key, outcome: .hit) }
            fromShared.withLock { $0 = true }
            return hit
          }
          let served = try await render()
          rendered.withLock { $0 = served }
          return Self.shareable(served)
        }
      }
      if claimed, let served = rendered.value {
        if !fromShared.value { metrics.shared(.rendered) }
        return served
      }
      let ended = try await waitForClaim(key: key, shared: shared)
      if let hit = ended.stored { return answer(hit, key: key, outcome: .waited) }
      switch ended.outcome {
      case .failed(let code, let status) where Self.sharedFailure(code, status):
        metrics.shared(.waited)
        var error = PipelineError(code, "another instance's render of this image failed (\(code))")
        error.httpStatus = status
        throw error
      case .failed, .unshared, .stored, nil:
        break
      }
      // Not shared by the other instance: rendered here, and shared when it can be.
      let served = try await gate.admitted { try await render() }
      rendered.withLock { $0 = served }
      metrics.shared(.rendered)
      if let result = Self.shareable(served) { try await shared.store(result, forKey: key) }
      return served
    } catch let error as PipelineError where error.code == .queueUnavailable {
      logger.warning("the shared cache is away; rendering here alone", metadata: ["error": "\(error.message)"])
      sharedAwayUntil.withLock { $0 = ContinuousClock.now + Self.sharedAwayFor }
      metrics.shared(.unavailable)
      // A render that finished before its result could be shared still answers.
      if let served = rendered.value { return served }
      return try await gate.admitted { try await render() }
    }
  }

  /// Waits for another instance's claim on `key` to end: woken at once by its end, and looking
  /// for the result every ``clusterPoll`` meanwhile (an end that came before this request began
  /// to wait is never heard). How the claim ended (`nil` after ``clusterWaitLimit``), and the
  /// stored result, read once, when there is one.
  ///
  /// The waiter stays registered for the whole wait. Registering anew for each look left a gap
  /// after every look in which an end was not heard; a failure is not stored, so a request that
  /// missed one waited out the limit and then fetched the source again. Each look also asks
  /// whether the claim is still held: one that ended before the waiting began, or lapsed with its
  /// instance, leaves nothing to wait for, and the request renders at once.
  private func waitForClaim(key: String, shared: any SharedResultStore) async throws -> (
    outcome: SharedRenderOutcome?, stored: SharedResult?
  ) {
    typealias Ended = (outcome: SharedRenderOutcome?, stored: SharedResult?)
    let deadline = ContinuousClock.now + Self.clusterWaitLimit
    return try await withThrowingTaskGroup(of: Ended?.self) { group in
      group.addTask {
        while ContinuousClock.now < deadline {
          // `nil`: the limit passed, the wait was cancelled, or the listening restarted and
          // every waiter was woken to look again.
          guard let outcome = await shared.waitForResult(forKey: key, timeout: deadline - .now) else {
            if Task.isCancelled { return nil }
            continue
          }
          switch outcome {
          case .stored: return (outcome, try await shared.result(forKey: key))
          case .failed, .unshared: return (outcome, nil)
          }
        }
        return nil
      }
      group.addTask {
        while ContinuousClock.now < deadline {
          // The claim before the result: a claim ends in the statement that stores its result.
          let held = try await shared.isClaimed(forKey: key)
          if let hit = try await shared.result(forKey: key) { return (.stored, hit) }
          // Neither: the claim ended (or lapsed) without a result before this request began to
          // wait, and its end was not heard. Rendered here.
          if !held { return (.unshared, nil) }
          do { try await Task.sleep(for: min(Self.clusterPoll, deadline - .now)) } catch { return nil }
        }
        return nil
      }
      while let ended = try await group.next() {
        if let ended {
          group.cancelAll()
          return ended
        }
      }
      return (nil, nil)
    }
  }

  /// Whether another instance's failure is this request's too: the source's own (not found,
  /// corrupt, too large…, or an origin's 4xx but 408 and 429), not the moment's (a time limit,
  /// an origin's 5xx, a cancelled client, a full queue).
  static func sharedFailure(_ code: PipelineError.Code, _ status: Int?) -> Bool {
    if code == .httpStatus, let status { return (400..<500).contains(status) && status != 408 && status != 429 }
    return code.isPermanent
  }

  /// What the shared cache keeps of `served`: nothing when it is private to its client or
  /// already expired.
  static func shareable(_ served: ServedImage) -> SharedResult? {
    guard !served.isPrivate, served.expiresAt > Date() else { return nil }
    let image = served.image
    return SharedResult(
      bytes: image.bytes.withUnsafeBytes { Array($0) }, format: image.format, width: image.width, height: image.height,
      expiresAt: served.expiresAt)
  }

  /// A shared result as this instance serves it: for no longer than its own `maxAge` (the row's
  /// expiry is another instance's policy, or a row changed behind its back), kept in memory.
  private func answer(_ hit: SharedResult, key: String, outcome: ServerMetrics.SharedOutcome) -> ServedImage {
    metrics.shared(outcome)
    let latest = Date() + TimeInterval(configuration.maxAge)
    let served = ServedImage(
      image: EncodedImage(
        source: ImageSource(key), bytes: ImageBytes(hit.bytes), format: hit.format, width: hit.width, height: hit.height),
      expiresAt: min(hit.expiresAt, latest))
    cache?.remember(served, key: key)
    return served
  }
}
