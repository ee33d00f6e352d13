import DarkroomCore

/// The `rotate` stage: turns the image clockwise by a quarter, a half or three quarters.
///
/// The EXIF orientation is applied by the decoder (`autoRotate`) before this: the angle is on
/// top of the upright image.
///
/// ```swift
/// let turned = Pipeline(name: "turned") { Fetcher(); ImageDecoder(); Rotator(.quarter); ImageEncoder(.jpeg(quality: 80)) }
/// ```
public struct Rotator: PixelOperation {
  public static let kind = "rotate"

  public var angle: RotationAngle

  public init(_ angle: RotationAngle) { self.angle = angle }

  public var identifier: String { "rotate(\(angle.rawValue))" }

  public func apply(to image: VipsImage) throws(PipelineError) -> VipsImage { try image.rotated(by: angle) }
}

/// The `flip` stage: mirrors the image horizontally, vertically, or both.
///
/// ```swift
/// let mirrored = Pipeline(name: "mirrored") { Fetcher(); ImageDecoder(); Flipper(.horizontal); ImageEncoder(.png()) }
/// ```
public struct Flipper: PixelOperation {
  public static let kind = "flip"

  public var direction: FlipDirection

  public init(_ direction: FlipDirection) { self.direction = direction }

  public var identifier: String { "flip(\(direction.rawValue))" }

  public func apply(to image: VipsImage) throws(PipelineError) -> VipsImage { try image.flipped(direction) }
}

/// A stage that changes an image's pixels with libvips operations: ``apply(to:)`` runs on a
/// blocking thread, and is stopped when the operation is cancelled. The built-in `rotate`,
/// `flip`, `grayscale`, `blur`, `sharpen`, `flatten` and `extend` are such stages; a stage of
/// your own can be one too.
///
/// ```swift
/// struct Transpose: PixelOperation {   // rows become columns
///   static let kind = "transpose"
///   var identifier: String { "transpose" }
///   func apply(to image: VipsImage) throws(PipelineError) -> VipsImage { try image.rotated(by: .quarter).flipped(.horizontal) }
/// }
/// ```
public protocol PixelOperation: Stage where Input == DecodedImage, Output == DecodedImage {
  /// The image with this operation applied (called on a blocking thread).
  func apply(to image: VipsImage) throws(PipelineError) -> VipsImage
  /// The operation applied to every frame of an animation, or once to a still image. By default
  /// ``apply(to:)`` runs on each frame; an operation whose result depends on the content (a trim)
  /// decides once, so that the frames stay one size.
  func applyToFrames(of image: VipsImage) throws(PipelineError) -> VipsImage
}

extension PixelOperation {
  public func process(_ input: DecodedImage, context: StageContext) async throws -> DecodedImage {
    let operation = self
    return try await VipsKillScope.blocking(context, inputs: [input.image]) {
      let result = try operation.applyToFrames(of: input.image)
      return operation is any ColourKeeping ? input.reshaped(result) : input.with(result)
    }
  }

  /// Applies the operation to each frame of an animation alike (to a still image, once).
  public func applyToFrames(of image: VipsImage) throws(PipelineError) -> VipsImage {
    try image.framewise(identifier) { frame throws(PipelineError) in try apply(to: frame) }
  }
}

/// An operation that only moves pixels (or drops them) and makes no colour that was not there: a
/// GIF source's colour tables still fit its result.
package protocol ColourKeeping {}

extension Rotator: ColourKeeping {}
extension Flipper: ColourKeeping {}
extension Trimmer: ColourKeeping {}
extension MetadataKeeper: ColourKeeping {}
