import Foundation

/// The time limits of a run's ``RunOptions``: the operation's ``RunOptions/timeout`` around the
/// whole run, and each stage's limit (``RunOptions/timeLimit(for:)``) around its call, its wait for
/// a slot included.
///
/// ```swift
/// var options = RunOptions(timeout: .seconds(10))
/// options.stageTimeouts["fetch"] = .seconds(3)    // the layer stops a fetch after 3 s
/// ```
struct TimeLimitLayer: RunLayer {
  struct Factory: RunLayerFactory {
    var key: AnyHashable { "time limits" }
    var order: RunLayerOrder { .limits }

    func makeLayer(for run: RunPlan) -> (any RunLayer)? {
      let options = run.options
      guard options.timeout != nil || options.stageTimeout != nil || !options.stageTimeouts.isEmpty else { return nil }
      return TimeLimitLayer(options: options)
    }
  }

  let options: RunOptions

  func aroundRun(_ run: RunPlan, body: @escaping @Sendable () async throws -> RunValue) async throws -> RunValue {
    guard let limit = options.timeout else { return try await body() }
    return try await PipelineExecutor.withTimeout(limit, source: run.context.source?.description, body)
  }

  func around(_ call: StageCall, next: @escaping StageCall.Next) async throws -> RunValue {
    guard let limit = options.timeLimit(for: call.stage) else { return try await next(call) }
    return try await PipelineExecutor.withTimeout(
      limit, source: call.context.source?.description, what: "stage \"\(call.stage.kind)\""
    ) { try await next(call) }
  }
}
