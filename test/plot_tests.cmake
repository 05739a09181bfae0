# Charts: the renderer's geometry, its text and its PNGs (zero/base/plot.h), and
# the CSV files beside every figure (zero/base/csv.h).
zero_test(NAME plot SOURCES test_plot.cpp)
if(STB_DIR)  # the test decodes the PNG with stb_image.h
  target_include_directories(plot SYSTEM PRIVATE "${STB_DIR}")
  target_compile_definitions(plot PRIVATE ZERO_HAVE_STB=1)
endif()
zero_test(NAME loss_plot SOURCES test_loss_plot.cpp ARGS ${CPU_TRAINER})
if(STB_DIR)
  target_include_directories(loss_plot SYSTEM PRIVATE "${STB_DIR}")
  target_compile_definitions(loss_plot PRIVATE ZERO_HAVE_STB=1)
endif()
