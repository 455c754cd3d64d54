// Translation unit that compiles the shared precompiled header (cmake/Pch.cmake); it holds no
// code of its own.
