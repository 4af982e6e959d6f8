a.o: /src/a.cu \
  /src/include\ dir/h.cuh /src/b.cuh
