import CVips
import CVipsShim
import DarkroomCore

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
    if let joinedFrames, joinedFrames.count == frameCount, joinedFrames.indices.contains(index) { return joinedFrames[index] }
    let page = Int32(clamping: frameHeight)
    return try derive("taking frame \(index)") { dr_frame($0, Int32(clamping: index), page, $1) }
  }

  /// The first frame alone, for formats that hold one image.
  public func firstFrame() throws(PipelineError) -> VipsImage { isAnimated ? try frame(0) : self }

  /// `operation` applied to each frame of an animation (or to a still image), the frames joined
  /// into a strip again with their delays and loop count. Every frame must come out the same size.
  public func framewise(_ what: String, _ operation: (VipsImage) throws(PipelineError) -> VipsImage) throws(PipelineError)
    -> VipsImage
  {
    guard isAnimated else { return try operation(self) }
    var size: (width: Int, height: Int)?
    return try VipsImage.joiningFrames(try VipsImage.applying(operation, to: allFrames()[...], size: &size, what), what)
  }

  /// `operation` on each of `frames`; every result must be of `size` (the first result's when
  /// `size` is `nil`, which it then becomes).
  private static func applying(
    _ operation: (VipsImage) throws(PipelineError) -> VipsImage, to frames: ArraySlice<VipsImage>,
    size: inout (width: Int, height: Int)?, _ what: String
  ) throws(PipelineError) -> [VipsImage] {
    var results: [VipsImage] = []
    results.reserveCapacity(frames.count)
    for frame in frames {
      let result = try operation(frame)
      if let size, result.width != size.width || result.height != size.height {
        throw PipelineError(
          .processingFailed,
          "\(what) made frames of different sizes (\(size.width)×\(size.height) and \(result.width)×\(result.height)); "
            + "an animation's frames must stay one size")
      }
      size = (result.width, result.height)
      results.append(result)
    }
    return results
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
    if let joinedFrames, joinedFrames.count == count { return joinedFrames }
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
    return try joiningStrips(frames, page: page, what, frames: frames)
  }

  /// Strips of frames `page` rows tall (frames are strips of one) as one strip, joined in groups
  /// of ``frameGroup``; `frames`, when given, are the frames it is made of.
  static func joiningStrips(_ strips: [VipsImage], page: Int, _ what: String, frames: [VipsImage]? = nil)
    throws(PipelineError) -> VipsImage
  {
    var level = strips
    while level.count > frameGroup {
      var joined: [VipsImage] = []
      for first in stride(from: 0, to: level.count, by: frameGroup) {
        joined.append(try joinOnce(Array(level[first..<min(level.count, first + frameGroup)]), page: page, what))
      }
      level = joined
    }
    return try joinOnce(level, page: page, what, frames: frames)
  }

  /// ``framewise(_:_:)`` for an operation whose frames are small (a resize down): the frames are
  /// made a group at a time and held in memory, so that each group's pipelines (and their
  /// buffers) are gone before the next group starts, instead of all living until the encoder has
  /// read the last frame. Only for results of at most `maxHeldPixels` pixels in all.
  public func framewiseHeld(
    _ what: String, maxHeldPixels: Int, _ operation: (VipsImage) throws(PipelineError) -> VipsImage
  ) throws(PipelineError) -> VipsImage {
    guard isAnimated else { return try operation(self) }
    let frames = try allFrames()
    var size: (width: Int, height: Int)?
    // The first frame's result says how large all of them are together.
    var pending = try Self.applying(operation, to: frames.prefix(1), size: &size, what)
    let page = size?.height ?? 1
    let (area, overflow) = (size?.width ?? 0).multipliedReportingOverflow(by: page)
    let (pixels, overflow2) = area.multipliedReportingOverflow(by: frames.count)
    guard !overflow, !overflow2, pixels <= maxHeldPixels else {
      return try Self.joiningFrames(pending + Self.applying(operation, to: frames.dropFirst(), size: &size, what), what)
    }
    var groups: [VipsImage] = []
    for frame in frames.dropFirst() {
      pending += try Self.applying(operation, to: [frame][...], size: &size, what)
      if pending.count == Self.frameGroup {
        groups.append(try Self.joiningFrames(pending, what).materialized())
        pending = []
      }
    }
    if !pending.isEmpty { groups.append(try Self.joiningFrames(pending, what).materialized()) }
    return try Self.joiningStrips(groups, page: page, what)
  }

  /// One join of strips (or frames) whose frames are `page` rows tall.
  private static func joinOnce(_ images: [VipsImage], page: Int, _ what: String, frames: [VipsImage]? = nil)
    throws(PipelineError) -> VipsImage
  {
    var pointers: [UnsafeMutablePointer<CVips.VipsImage>?] = images.map(\.pointer)
    var out: UnsafeMutablePointer<CVips.VipsImage>?
    let status = pointers.withUnsafeMutableBufferPointer { buffer in
      dr_join_frames(buffer.baseAddress, Int32(clamping: buffer.count), Int32(clamping: page), &out)
    }
    guard status == 0, let out else {
      let cause = Vips.captureError()
      throw PipelineError(.processingFailed, "\(what): joining the frames failed: \(cause.text)", cause: cause)
    }
    return VipsImage(taking: out, keepAlive: images, joinedFrames: frames)
  }
}
