import CVips
import CVipsShim
import DarkroomCore

/// An immutable libvips image: a reference-counted handle, released when the last Swift
/// reference goes.
///
/// libvips images are lazy descriptions of pixels; nothing is computed until an image is saved or
/// measured. The handle is immutable and libvips is thread-safe for reading it, so the wrapper is
/// `Sendable`. An image made from memory keeps that memory alive (`ImageBytes`) for as long as
/// it, or any image derived from it, exists.
///
/// ```swift
/// let image = try VipsImage.load(.jpeg, from: bytes)
/// let small = try image.resized(horizontal: 0.25, vertical: 0.25, kernel: .lanczos3)
/// print(small.width, small.height)
/// ```
public final class VipsImage: @unchecked Sendable {
  // Never mutated after init; libvips images are immutable once built and their reference
  // counting is atomic, which is what makes this class safe to share (@unchecked Sendable).
  let pointer: UnsafeMutablePointer<CVips.VipsImage>
  /// Memory (and source images) that must outlive this image.
  private let keepAlive: [AnyObject]
  /// For an animation whose frames are made as they are read (``framewise(_:_:)``): what makes
  /// them, so that the next stage builds on each frame instead of cutting the strip up again.
  let frameMaker: FrameMaker?

  init(taking pointer: UnsafeMutablePointer<CVips.VipsImage>, keepAlive: [AnyObject], frameMaker: FrameMaker? = nil) {
    self.pointer = pointer
    self.keepAlive = keepAlive
    self.frameMaker = frameMaker
    VipsKillScope.noteMade(self)
  }

  /// What `images` keep alive that libvips does not know of: the memory they read (`ImageBytes`
  /// and other owners), without the images between. libvips keeps an image's inputs alive
  /// itself; an image that holds only this lets each input go as soon as libvips does.
  static func ownedMemory(of images: [VipsImage]) -> [AnyObject] {
    var seen = Set<ObjectIdentifier>()
    var owned: [AnyObject] = []
    var pending: [AnyObject] = images
    while let next = pending.popLast() {
      guard seen.insert(ObjectIdentifier(next)).inserted else { continue }
      if let image = next as? VipsImage { pending += image.keepAlive } else { owned.append(next) }
    }
    return owned
  }

  deinit { g_object_unref(pointer) }

  /// Width in pixels.
  public var width: Int { Int(dr_image_width(pointer)) }
  /// Height in pixels.
  public var height: Int { Int(dr_image_height(pointer)) }
  /// Number of bands (3 for RGB, 4 for RGBA…).
  public var bands: Int { Int(dr_image_bands(pointer)) }
  /// Whether the last band is alpha.
  /// The bytes of compressed sources (`ImageBytes`) this image keeps alive, through the images it
  /// was made from: what a lazily decoded image costs before its pixels are decoded.
  public var retainedSourceBytes: Int {
    keepAlive.reduce(0) { total, object in
      switch object {
      case let bytes as ImageBytes: total.addingReportingOverflow(bytes.count).overflow ? Int.max : total + bytes.count
      case let parent as VipsImage:
        total.addingReportingOverflow(parent.retainedSourceBytes).overflow ? Int.max : total + parent.retainedSourceBytes
      default: total
      }
    }
  }

  /// The bytes one pixel takes in memory (bands × bytes per sample).
  public var bytesPerPixel: Int { Int(dr_format_sizeof(dr_image_format(pointer))) * bands }
  public var hasAlpha: Bool { dr_image_hasalpha(pointer) != 0 }
  /// The EXIF orientation tag (1…8; 1 when absent).
  public var orientation: Int { Int(dr_image_orientation(pointer)) }
  /// Whether an ICC profile is attached.
  public var hasICCProfile: Bool { dr_has_icc(pointer) != 0 }
  /// The colour interpretation.
  var interpretation: VipsInterpretation { dr_image_interpretation(pointer) }
  /// The pixel format of each band.
  var bandFormat: VipsBandFormat { dr_image_format(pointer) }

  /// Runs a shim call producing a new image; throws with libvips' error text on failure.
  func derive(
    _ what: String, code: PipelineError.Code = .processingFailed,
    _ call: (UnsafeMutablePointer<CVips.VipsImage>, UnsafeMutablePointer<UnsafeMutablePointer<CVips.VipsImage>?>) -> Int32
  ) throws(PipelineError) -> VipsImage {
    var out: UnsafeMutablePointer<CVips.VipsImage>?
    guard call(pointer, &out) == 0, let out else {
      let cause = Vips.captureError()
      throw PipelineError(Vips.isLoaderFailure(cause) ? .corruptImage : code, "\(what) failed: \(cause.text)", cause: cause)
    }
    return VipsImage(taking: out, keepAlive: [self])
  }

  /// Stops any evaluation of this image in progress (used on cancellation).
  public func kill() { dr_kill(pointer) }

  /// Decodes all pixels into memory now (so later steps cannot fail on damaged data).
  public func materialized() throws(PipelineError) -> VipsImage {
    guard let out = dr_image_copy_memory(pointer) else {
      let cause = Vips.captureError()
      // Pulling pixels fails when the source data is damaged. The message cannot decide this:
      // libvips' error buffer is process-wide, so a concurrent failure may have taken it.
      throw PipelineError(.corruptImage, "decoding pixels failed: \(cause.text)", cause: cause)
    }
    return VipsImage(taking: out, keepAlive: [])
  }
}
