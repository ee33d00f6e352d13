import Darkroom

/// How long the source said it stays fresh, learnt from the fetch of one render.
final class SourceFreshness: Sendable {
  private let seconds = Protected<Int?>(nil)
  private let shared = Protected(true)

  /// The source's own max-age in seconds (0 for `no-store`), or `nil` when it said nothing.
  var maxAge: Int? { seconds.value }
  /// False when the source may be kept only by its own client (`private`, `Vary: *`).
  var shareable: Bool { shared.value }

  func note(_ freshness: Freshness, shareable: Bool) {
    shared.withLock { $0 = shareable }
    let value: Int?
    switch freshness {
    case .noStore: value = 0
    case .lifetime(let duration): value = Int(max(0, min(duration.components.seconds, 315_360_000)))
    case .unspecified: value = nil
    }
    seconds.withLock { $0 = value }
  }
}

/// Reads the fetch's response facts (which ride with its output, also when the fetch was shared
/// with another request) into a render's ``SourceFreshness``.
struct SourceFreshnessLayer: RunLayer {
  struct Factory: RunLayerFactory {
    let freshness: SourceFreshness
    var key: AnyHashable { "darkroom.serve.freshness" }
    var order: RunLayerOrder { .observation }
    func makeLayer(for run: RunPlan) -> (any RunLayer)? { SourceFreshnessLayer(freshness: freshness) }
  }

  let freshness: SourceFreshness

  func around(_ call: StageCall, next: @escaping StageCall.Next) async throws -> RunValue {
    let result = try await next(call)
    if call.stage.kind == "fetch", let facts = result.annotations[ResponseFacts.self] {
      freshness.note(facts.freshness, shareable: facts.shareable)
    }
    return result
  }
}
