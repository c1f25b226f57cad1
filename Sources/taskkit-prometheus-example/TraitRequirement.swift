// The example is built only with the package trait `Examples` (swift-prometheus): without it,
// main.swift is compiled out (`#if Examples`) and this file stops the build naming the trait.
#if !Examples
#error("taskkit-prometheus-example needs the package trait Examples: swift run --enable-all-traits taskkit-prometheus-example")
#endif
