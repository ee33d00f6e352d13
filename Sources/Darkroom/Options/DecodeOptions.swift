/// JSON options of the `decode` stage.
package struct DecodeOptions: StageOptions {
  public var maxPixels: Int
  public var autoRotate: Bool
  public var convertToSRGB: Bool
  public var lenient: Bool
  public var share: Bool

  public static let specs = [
    OptionSpec(
      "maxPixels", .integer(min: 1), default: 100_000_000,
      "The largest width × height accepted, checked from the header before decoding; larger images fail with imageTooLarge. Images a decoder holds whole (AVIF/HEIF, interlaced PNG, progressive JPEG) may take at most 4 bytes a pixel of it while decoded."
    ),
    OptionSpec("autoRotate", .boolean, default: true, "Apply the EXIF orientation so the image is upright."),
    OptionSpec("convertToSRGB", .boolean, default: true, "Convert embedded ICC profiles (and CMYK) to sRGB."),
    OptionSpec(
      "lenient", .boolean, default: false,
      "Accept truncated or damaged pixel data and return what could be decoded, marked partial (decodes eagerly)."),
    OptionSpec(
      "share", .boolean, default: false,
      "Share one in-memory decode between operations decoding identical bytes at the same time (no shrink-on-load)."),
  ]
}
