/// The `notify` stage: posts a named ``LoadNotification`` through its ``Notifier`` when a run
/// reaches it, and hands the value on unchanged.
///
/// The payload describes the value at that point (dimensions, format, bytes of an image), the
/// source and the cache outcomes so far. With ``announcesEnd`` the notifier also announces how
/// each operation of the pipeline ends (`didFinish`, `didFail` with the error, `didCancel`) —
/// failures included, which a stage alone could not see.
///
/// ```swift
/// let notifier = Notifier(sinks: [JSONLinesSink.standardOutput])
/// let pipeline = Pipeline(name: "avatar") {
///   Fetcher()
///   ImageDecoder()
///   Resizer(width: 128, height: 128, mode: .fill)
///   ImageEncoder(.webp(quality: 80))
///   Notify<EncodedImage>("avatarReady", notifier: notifier)
/// }
/// ```
public struct Notify<Value: Sendable>: Stage, LayeredStage, ContextSensitiveStage {
  public static var kind: String { "notify" }

  /// The notification's name.
  public var name: String
  public var notifier: Notifier
  /// Also announce each operation's end through the notifier.
  public var announcesEnd: Bool

  public init(_ name: String, notifier: Notifier, announcesEnd: Bool = true) {
    self.name = name
    self.notifier = notifier
    self.announcesEnd = announcesEnd
  }

  /// Notifications change nothing in the value: the identifier is the same for every name, so
  /// cache keys and shared work are not split by them.
  public var identifier: String { "notify" }

  public func resource(for input: Value) -> StageResource { .light }

  public func process(_ input: Value, context: StageContext) async throws -> Value {
    let image = outputSummary(of: input).map { LoadNotification.Image($0) }
    notifier.post(
      LoadNotification(
        name: name, operationID: context.operationID.description, pipeline: context.pipelineName,
        source: context.source?.description, image: image))
    return input
  }

  /// With ``announcesEnd``, every run of a pipeline holding this stage gets the notifier as an
  /// observer: one notifier behind several `notify` stages announces each end once.
  package var runLayer: (any RunLayerFactory)? { announcesEnd ? NotifierLayer(notifier: notifier) : nil }
}

/// What a `notify` stage brings to a run: its notifier, observing the operation.
struct NotifierLayer: RunLayerFactory {
  let notifier: Notifier

  var key: AnyHashable { ObjectIdentifier(notifier) }
  var order: RunLayerOrder { .observation }
  var observers: [any OperationObserver] { [notifier] }
  func makeLayer(for run: RunPlan) -> (any RunLayer)? { nil }
}

/// Builds ``Notify`` stages for the `notify` kind, whatever value flows at their place.
package struct NotifyFactory: PassThroughStageFactory {
  public var name: String
  public var notifier: Notifier
  public var announcesEnd: Bool

  public init(name: String, notifier: Notifier, announcesEnd: Bool) {
    self.name = name
    self.notifier = notifier
    self.announcesEnd = announcesEnd
  }

  public func makeStage<Value: Sendable>(for type: Value.Type) throws -> AnyStage {
    AnyStage(Notify<Value>(name, notifier: notifier, announcesEnd: announcesEnd))
  }
}
