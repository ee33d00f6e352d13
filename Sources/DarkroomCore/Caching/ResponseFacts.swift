import Foundation

/// What a fetched response said about caching: its freshness and validators, and whether it may
/// be kept for other callers at all.
package struct ResponseFacts: Sendable {
  package var freshness: Freshness
  var validators: CacheValidators
  /// False for a response that is `private`, or that varies on what no key holds (`Vary: *`): it
  /// is never stored, whatever the cache's maxAge says (every store here is shared by the callers
  /// of a process or of several). `no-store` is ``Freshness/noStore``, which a cache's maxAge > 0
  /// overrides on purpose (keys hold the request headers, so no caller gets another's response).
  package var shareable = true

  init(_ fetched: FetchedData, now: Date) {
    freshness = fetched.freshness(now: now)
    validators = CacheValidators(fetched)
    shareable = ResponseFacts.isShareable(fetched.metadata)
  }

  /// Facts inherited from a cache entry a run resumed from (no fetch ran).
  init(entry: CacheEntry, now: Date) {
    // Clamped to a century: an expiry read from a store is a number from a file.
    let century = 100 * 365.25 * 86_400
    freshness =
      entry.expiresAt.map { expiry in
        let left = expiry.timeIntervalSince(now)
        return .lifetime(.seconds(left.isFinite ? min(max(0, left), century) : 0))
      } ?? .unspecified
    validators = entry.validators
  }

  /// Whether lower-cased response headers allow a shared cache to keep the response.
  static func isShareable(_ headers: [String: String]) -> Bool {
    let directives = Freshness.directives(headers["cache-control"] ?? "")
    if directives["private"] != nil { return false }
    let vary = (headers["vary"] ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
    return !vary.contains("*")
  }
}

extension RunValue {
  /// Notes what the value says about caching when it is a fetched response (replacing what an
  /// earlier value said: a checkpoint's entry the run resumed from).
  mutating func noteResponseFacts() {
    guard let fetched = value as? FetchedData, fetched.status != nil else { return }
    annotations[ResponseFacts.self] = ResponseFacts(fetched, now: Date())
  }
}

/// Notes a fetched response's facts on the fetch's output where the output is made: inside the
/// loader's shared work (``RunLayerOrder/values``), so that a run joining the transfer, or any
/// later stage computed from it, gets them with the value even when the run that started the
/// work keeps no checkpoints. A ``Fetcher`` brings it.
///
/// ```swift
/// // fetch → decode → cache, joining another run's transfer: the checkpoint is stored with the
/// // response's validators and lifetime, and a private response is not stored at all.
/// ```
struct ResponseFactsLayer: RunLayer {
  struct Factory: RunLayerFactory {
    var key: AnyHashable { "response facts" }
    var order: RunLayerOrder { .values }
    func makeLayer(for run: RunPlan) -> (any RunLayer)? { ResponseFactsLayer() }
  }

  func around(_ call: StageCall, next: @escaping StageCall.Next) async throws -> RunValue {
    var output = try await next(call)
    output.noteResponseFacts()
    return output
  }
}

extension Fetcher: LayeredStage {
  /// What the fetched response says about caching rides with its value (``ResponseFactsLayer``).
  package var runLayer: (any RunLayerFactory)? { ResponseFactsLayer.Factory() }
}
