import CVips
import CVipsShim
import DarkroomCore
import Synchronization

/// Animations: a GIF or animated WebP is decoded as a strip of frames, one under the other, each
/// ``frameHeight`` pixels tall, with its delays and loop count. Operations run on each frame
/// alike (``framewise(_:_:)``); an encoder to a still format takes the first frame.
extension VipsImage {
  /// Whether this is a strip of two or more frames (a `page-height` that divides the height).
  public var isAnimated: Bool {
    let page = Int(dr_page_height_field(pointer))
    return page > 0 && page < height && height % page == 0
  }

  /// The height of one frame: the page height of an animation, the height of a still image.
  public var frameHeight: Int { isAnimated ? Int(dr_page_height_field(pointer)) : height }

  /// How many frames the image holds (1 for a still image).
  public var frameCount: Int { isAnimated ? height / max(1, frameHeight) : 1 }

  /// The declared number of pages of the file this image was loaded from (1 when not declared).
  var declaredPages: Int { max(1, Int(dr_n_pages(pointer))) }

  /// Each frame's delay in milliseconds (empty for a still image or an animation without delays).
  public var frameDelays: [Int] {
    var delays = [Int32](repeating: 0, count: ImageDecoder.maxFrames)
    let count = Int(dr_frame_delays(pointer, &delays, Int32(delays.count)))
    return delays.prefix(min(count, delays.count)).map(Int.init)
  }

  /// How many times the animation plays (0: for ever), or `nil` when the image does not say.
  public var loopCount: Int? {
    let value = Int(dr_loop_count(pointer))
    return value < 0 ? nil : value
  }

  /// Frame `index` as a still image.
  public func frame(_ index: Int) throws(PipelineError) -> VipsImage {
    try frames().frame(index)
  }

  /// The first frame alone, for formats that hold one image.
  public func firstFrame() throws(PipelineError) -> VipsImage { isAnimated ? try frame(0) : self }

  /// `operation` applied to each frame of an animation (or to a still image), the frames joined
  /// into a strip again with their delays and loop count. Every frame must come out the same size.
  ///
  /// The first frame is made now (its errors are this call's); the others are made when the
  /// strip is read, once, from top to bottom, and each frame's pipeline goes once its rows have
  /// been read: one frame's buffers live at a time, however many frames there are.
  public func framewise(
    _ what: String, _ operation: @escaping @Sendable (VipsImage) throws(PipelineError) -> VipsImage
  ) throws(PipelineError) -> VipsImage {
    guard isAnimated else { return try operation(self) }
    let source = frames()
    let first = try operation(try source.frame(0))
    let maker = FrameMaker(count: source.count, first: first) { index throws(PipelineError) in
      try operation(try source.frame(index))
    }
    var out: UnsafeMutablePointer<CVips.VipsImage>?
    let context = Unmanaged.passRetained(maker).toOpaque()
    let status = dr_join_made_frames(
      first.pointer, Int32(clamping: source.count),
      DrFrameMaker(
        make: makeFrame, release_owner: { if let owner = $0 { Unmanaged<VipsImage>.fromOpaque(owner).release() } },
        release_context: { if let maker = $0 { Unmanaged<FrameMaker>.fromOpaque(maker).release() } }, context: context),
      &out)
    guard status == 0, let out else {
      let cause = Vips.captureError()
      throw PipelineError(.processingFailed, "\(what): joining the frames failed: \(cause.text)", cause: cause)
    }
    // The strip reads nothing of `first` (its frames come from the maker); the compressed source
    // is named so that a cache counts what the strip keeps alive.
    let sources = VipsImage.ownedMemory(of: [first]).filter { $0 is ImageBytes }
    return VipsImage(taking: out, keepAlive: sources, frameMaker: maker)
  }

  /// This animation's frames: made by the maker this strip was joined with, or cut from it.
  func frames() -> FrameMaker {
    if let frameMaker, frameMaker.count == frameCount { return frameMaker }
    let page = Int32(clamping: frameHeight)
    return FrameMaker(count: frameCount) { [self] index throws(PipelineError) in
      try derive("taking frame \(index)") { dr_frame($0, Int32(clamping: index), page, $1) }
    }
  }

  /// The frames that decode, from the first up to the one before the first that does not, held in
  /// memory as a strip (a lenient decoder's partial animation); `corruptImage` when not even the
  /// first frame decodes.
  func leadingDecodableFrames() throws(PipelineError) -> VipsImage {
    guard isAnimated else { return try materialized() }
    var decoded: [VipsImage] = []
    for frame in try allFrames() {
      guard let held = try? frame.materialized() else { break }
      decoded.append(held)
    }
    guard !decoded.isEmpty else { return try frame(0).materialized() }
    return decoded.count == 1 ? decoded[0] : try VipsImage.joiningFrames(decoded, "keeping the frames that decode")
  }

  /// How many images one split or join touches at most. libvips checks an image's links to the
  /// images it feeds each time a region is made on them, so one strip cut into 1,000 frames (or
  /// 1,000 frames joined at once) costs time with the square of the frames; groups keep it linear.
  static let frameGroup = 32

  /// Every frame as a still image: the frames a join was made of, or cuts of the strip, made in
  /// groups (a cut of ``frameGroup`` frames, then the frames of each cut).
  func allFrames() throws(PipelineError) -> [VipsImage] {
    let count = frameCount
    if let frameMaker, frameMaker.count == count {
      return try (0..<count).map { index throws(PipelineError) in try frameMaker.frame(index) }
    }
    let page = frameHeight
    var frames: [VipsImage] = []
    frames.reserveCapacity(count)
    for first in stride(from: 0, to: count, by: Self.frameGroup) {
      let size = min(Self.frameGroup, count - first)
      let group =
        count <= Self.frameGroup ? self : try cropped(x: 0, y: first * page, width: width, height: size * page)
      for index in 0..<size {
        frames.append(try group.derive("taking frame \(first + index)") { dr_frame($0, Int32(index), Int32(page), $1) })
      }
    }
    return frames
  }

  /// Frames of one size as one strip, joined in groups of ``frameGroup``.
  static func joiningFrames(_ frames: [VipsImage], _ what: String) throws(PipelineError) -> VipsImage {
    guard let page = frames.first?.height else {
      throw PipelineError(.processingFailed, "\(what): an animation without frames")
    }
    return try joiningStrips(frames, page: page, what)
  }

  /// Strips of frames `page` rows tall (frames are strips of one) as one strip, joined in groups
  /// of ``frameGroup``.
  static func joiningStrips(_ strips: [VipsImage], page: Int, _ what: String) throws(PipelineError) -> VipsImage {
    var level = strips
    while level.count > frameGroup {
      var joined: [VipsImage] = []
      for first in stride(from: 0, to: level.count, by: frameGroup) {
        joined.append(try joinOnce(Array(level[first..<min(level.count, first + frameGroup)]), page: page, what))
      }
      level = joined
    }
    return try joinOnce(level, page: page, what)
  }

  /// One join of strips (or frames) whose frames are `page` rows tall.
  private static func joinOnce(_ images: [VipsImage], page: Int, _ what: String) throws(PipelineError) -> VipsImage {
    var pointers: [UnsafeMutablePointer<CVips.VipsImage>?] = images.map(\.pointer)
    var out: UnsafeMutablePointer<CVips.VipsImage>?
    let status = pointers.withUnsafeMutableBufferPointer { buffer in
      dr_join_frames(buffer.baseAddress, Int32(clamping: buffer.count), Int32(clamping: page), &out)
    }
    guard status == 0, let out else {
      let cause = Vips.captureError()
      throw PipelineError(.processingFailed, "\(what): joining the frames failed: \(cause.text)", cause: cause)
    }
    // libvips' join holds the images until they have been read, and each image its own inputs.
    return VipsImage(taking: out, keepAlive: VipsImage.ownedMemory(of: images))
  }
}

/// An animation's frames, each made when it is asked for (the strip of a ``VipsImage/framewise(_:_:)``
/// is read once, so each frame is made once).
///
/// The first frame, made when the stage ran, is kept until it is first asked for: the next stage
/// builds on it (and the encoder reads it) instead of making it again through every stage
/// before, which for a chain of stages that copy their input (rotate, trim) cost a copy per stage
/// per stage.
final class FrameMaker: Sendable {
  let count: Int
  private let make: @Sendable (Int) throws(PipelineError) -> VipsImage
  private let first: Mutex<VipsImage?>

  init(count: Int, first: VipsImage? = nil, make: @escaping @Sendable (Int) throws(PipelineError) -> VipsImage) {
    self.count = count
    self.make = make
    self.first = Mutex(first)
  }

  func frame(_ index: Int) throws(PipelineError) -> VipsImage {
    if index == 0, let kept = first.withLock({ kept in kept.take() }) { return kept }
    return try make(index)
  }
}

/// The strip's callback: frame `index` made on a libvips thread, its wrapper handed to the strip
/// (which releases it once the frame has been read), or the error put in libvips' buffer.
private func makeFrame(
  _ context: UnsafeMutableRawPointer?, _ index: Int32, _ owner: UnsafeMutablePointer<UnsafeMutableRawPointer?>?
) -> UnsafeMutablePointer<CVips.VipsImage>? {
  guard let context, let owner else { return nil }
  let maker = Unmanaged<FrameMaker>.fromOpaque(context).takeUnretainedValue()
  do {
    let frame = try maker.frame(Int(index))
    owner.pointee = Unmanaged.passRetained(frame).toOpaque()
    return frame.pointer
  } catch {
    dr_note_error("frame \(index): \(error.message)")
    return nil
  }
}
