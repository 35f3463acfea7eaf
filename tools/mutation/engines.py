"""Mutants of the engines' per-user bounding and grouping (see :mod:`mutation`)."""

from __future__ import annotations

from . import Mutant

_CHUNKED = "tests/engines/test_chunked_engine.py"
_MEMORY = "tests/engines/test_memory_engine.py"
_KEYED = "tests/engines/test_keyed_batches.py"
_SPARK = "tests/engines/test_spark_engine.py"
_GUARDS = "tests/releases/test_release_guards.py"
_OUTSIDE_RELEASE = (
    "tests/releases/test_engines_agree.py::test_items_outside_the_domain_are_dropped_alike_on_every_engine_and_never_refused"
)
_PARTS = "tests/engines/test_duckdb_engine.py::test_key_count_parts_in_sql_rank_ties_by_text_and_clip_as_the_parts_do"
_OUTSIDE_DATA = "tests/test_data.py::test_items_outside_the_declared_domain_are_dropped_person_by_person"

MUTANTS: list[Mutant] = [
    # -- the chunked engine: whole users per chunk ----------------------------------------------------
    Mutant(
        "chunked-stream-not-ordered-by-user",
        "engine-bounding",
        "engines/duckdb.py",
        'for t in _whole_users(self._reader(f"SELECT u, {data.item_sql} FROM {data.view} ORDER BY u")):',
        'for t in _whole_users(self._reader(f"SELECT u, {data.item_sql} FROM {data.view}")):',
        (
            f"{_CHUNKED}::test_rows_in_any_order_count_each_person_once",
            f"{_CHUNKED}::test_every_chunking_keeps_each_person_whole",
        ),
        "the ordered stream of whole users is read in the file's order: a person whose rows are not contiguous "
        "is split over chunks and counted twice (twice the sensitivity)",
    ),
    Mutant(
        "chunked-user-sizes-first-chunk",
        "engine-bounding",
        "engines/streams.py",
        "lo = int(c.min()) if lo is None else min(lo, int(c.min()))",
        "lo = int(c.min()) if lo is None else lo",
        (f"{_CHUNKED}::test_chunked_user_sizes_see_the_smallest_person_in_any_chunk",),
        "the smallest user size is read off the first chunk only: a bounded release (m public) goes ahead on "
        "users of different sizes when the smaller one comes later",
    ),
    # -- the in-memory engine: grouping rows by user, edges, key records --------------------------------------
    Mutant(
        "memory-group-runs-when-any-pair-is-sorted",
        "engine-bounding",
        "data/dataset.py",
        "bool(np.all(users[1:] >= users[:-1]))",
        "bool(np.any(users[1:] >= users[:-1]))",
        (f"{_MEMORY}::test_memory_engine_groups_a_person_s_rows_wherever_they_lie",),
        "rows not sorted by user are grouped in runs: a user whose rows come back later becomes a second user "
        "(a second distribution of mass 1, twice the sensitivity)",
        (4,),
    ),
    Mutant(
        "dedupe-runs-never-marks",
        "engine-bounding",
        "data/dataset.py",
        "                seen[c] = u\n",
        "",
        ("tests/test_data.py::test_dedupe_equals_the_unique_of_user_item_pairs",),
        "the sets of person-element edges keep repeated items: a person holding an element twice counts twice "
        "toward the distinct count and the set union",
        (4,),
    ),
    Mutant(
        "memory-edges-grouped-not-deduped",
        "engine-bounding",
        "engines/base.py",
        "return UserDataset(offsets, items, keys[keep], domain).dedupe()",
        "return UserDataset(offsets, items, keys[keep], domain)",
        (f"{_MEMORY}::test_edges_are_the_distinct_person_item_pairs",),
        "a dataset grouped by person gives edges with repeats: a person's repeated item counts several times in "
        "the distinct count",
    ),
    Mutant(
        "edges-from-pairs-not-deduped",
        "engine-bounding",
        "engines/base.py",
        "return UserDataset(offsets, codes[order], keys, domain).dedupe()",
        "return UserDataset(offsets, codes[order], keys, domain)",
        (f"{_MEMORY}::test_edges_are_the_distinct_person_item_pairs",),
        "edges read from records (tables, chunks, Spark) keep repeats: a person's repeated item counts several "
        "times in the distinct count",
        (4,),
    ),
    Mutant(
        "memory-edges-repeated-ids-taken-for-grouped",
        "engine-bounding",
        "engines/base.py",
        "grouped = bool(np.all(keys[:-1] < keys[1:])) if keys.size > 1 else True",
        "grouped = bool(np.all(keys[:-1] <= keys[1:])) if keys.size > 1 else True",
        (f"{_MEMORY}::test_edges_are_the_distinct_person_item_pairs",),
        "a dataset whose person ids repeat is taken for grouped: one person on two rows becomes two persons of "
        "the distinct count (twice the sensitivity)",
    ),
    Mutant(
        "key-records-multiplicities-dropped",
        "engine-bounding",
        "engines/base.py",
        "np.bincount(inv.ravel(), weights=np.asarray(mult, dtype=np.float64), minlength=pair.size)",
        "np.bincount(inv.ravel(), minlength=pair.size)",
        (f"{_CHUNKED}::test_key_records_in_chunks_add_up_a_person_s_records_of_a_key",),
        "records per (person, key) aggregated in chunks or on Spark count as one: the per-key counts and the "
        "bounds chosen from them are wrong on every engine but memory",
    ),
    Mutant(
        "key-records-pair-code-collision",
        "engine-bounding",
        "engines/base.py",
        "n_lab = max(1, len(domain))",
        "n_lab = max(1, len(domain) - 1)",
        (f"{_MEMORY}::test_key_records_add_up_a_person_s_records_of_a_key",),
        "(person, key) pairs coded with one slot too few collide: one person's records of its last key are "
        "given to the next person",
        (4,),
    ),
    Mutant(
        "dataset-sample-never-the-last-item",
        "sampler",
        "data/dataset.py",
        "highs = np.repeat(counts, s)",
        "highs = np.repeat(counts - 1, s)",
        ("tests/test_data.py::test_sampling_with_replacement",),
        "BoundedEMDReduction's sampling with replacement never draws a user's last item (and fails on users of "
        "one item): the sampled multisets are not the law the reduction's guarantee assumes",
    ),
    Mutant(
        "dataset-sample-without-replacement-keeps-one-more",
        "contribution-bound",
        "data/dataset.py",
        "keep = order[rank < s]",
        "keep = order[rank <= s]",
        ("tests/test_data.py::test_sampling_without_replacement",),
        "sampling without replacement keeps s + 1 items of a user: one item more than the bound",
    ),
    # -- bounded_item_sums_of: at most cap items per person, chosen by the person's keyed stream ---------------
    Mutant(
        "bounded-items-cap-off-by-one",
        "contribution-bound",
        "engines/base.py",
        "heavy = np.flatnonzero(deg > cap)",
        "heavy = np.flatnonzero(deg > cap + 1)",
        (
            f"{_MEMORY}::test_bounded_item_sums_equal_the_definition",
            "tests/releases/test_engines_agree.py::test_memory_and_chunked_releases_are_identical_and_their_"
            "aggregates_right[vocabulary, DP-SIPS]",
        ),
        "a person holding cap + 1 items keeps all of them: one item more than the set union's sensitivity allows",
        (4,),
    ),
    Mutant(
        "bounded-items-keyed-by-position",
        "keyed-purpose",
        "engines/base.py",
        "keep(sets.user_ids[u], int(hi - lo))",
        "keep(u, int(hi - lo))",
        (f"{_CHUNKED}::test_bounded_item_sums_in_chunks_equal_the_definition",),
        "the kept items are drawn from the stream of the person's position instead of its key: persons at the "
        "same position of different chunks or partitions share a stream, and engines keep different items",
        (6,),
    ),
    Mutant(
        "bounded-items-weights-of-held-count",
        "contribution-bound",
        "engines/base.py",
        "k = np.minimum(deg, cap)",
        "k = deg",
        (f"{_MEMORY}::test_bounded_item_sums_equal_the_definition",),
        "the weights of a person above the bound are those of all its items, not of the kept ones: the "
        "weighted union's sums and threshold no longer match its calibration",
        (4,),
    ),
    # -- keyed per-user draws: the person's key, the purpose, the bound m -------------------------------------
    Mutant(
        "memory-sample-keyed-by-position",
        "keyed-purpose",
        "engines/memory.py",
        "batch = streams.batch(ds.user_ids, SAMPLE_PURPOSE)",
        "batch = streams.batch(np.arange(ds.n_users), SAMPLE_PURPOSE)",
        (f"{_KEYED}::test_each_keyed_step_reads_the_person_s_own_stream_for_its_own_purpose",),
        "samples drawn from the stream of the user's position: users at the same position of different chunks "
        "or partitions draw the same samples, and a retried task on a re-ordered partition others",
        (6,),
    ),
    Mutant(
        "memory-randomize-with-sampling-purpose",
        "keyed-purpose",
        "engines/memory.py",
        "batch = streams.batch(ds.user_ids, RANDOMIZE_PURPOSE)",
        "batch = streams.batch(ds.user_ids, SAMPLE_PURPOSE)",
        (f"{_KEYED}::test_each_keyed_step_reads_the_person_s_own_stream_for_its_own_purpose",),
        "the randomization reads the words the sampling already used: a user's samples and randomized items are "
        "correlated, and the randomizer's guarantee assumes fresh randomness",
        (4, 6),
    ),
    Mutant(
        "memory-randomize-m-at-least",
        "contribution-bound",
        "engines/memory.py",
        "ds.require_equal_sizes() != m",
        "ds.require_equal_sizes() < m",
        (f"{_GUARDS}::test_a_source_whose_persons_grow_between_passes_is_refused",),
        "users holding more than the public m are randomized under m's guarantee (each contributes more "
        "items than the bound)",
    ),
    # -- sums of per-user distributions: a user's mass split by its size ----------------------------------------
    Mutant(
        "count-table-dropped-rows-counted",
        "engine-bounding",
        "engines/base.py",
        "dropped = bool(bins.size and bins.min() < 0)",
        "dropped = bool(bins.size and bins.min() < -1)",
        (f"{_MEMORY}::test_grid_sum_counts_each_person_s_points_inside_the_box",),
        "a user's size counts its points outside the box: users with points outside get less than mass 1",
    ),
    Mutant(
        "sparse-grid-size-counts-dropped-rows",
        "engine-bounding",
        "engines/base.py",
        "size = np.bincount(users[kept], minlength=offsets.size - 1)",
        "size = np.bincount(users, minlength=offsets.size - 1)",
        (f"{_MEMORY}::test_grid_sum_counts_each_person_s_points_inside_the_box",),
        "on a large grid a user's size counts its points outside the box: users with points outside get less "
        "than mass 1",
    ),
    Mutant(
        "user-means-divided-by-n-minus-1",
        "sensitivity",
        "engines/base.py",
        "_fsum_segments(offsets, np.ascontiguousarray(v2[:, j])) / counts",
        "_fsum_segments(offsets, np.ascontiguousarray(v2[:, j])) / np.maximum(counts - 1, 1)",
        (
            "tests/releases/test_engines_agree.py::"
            "test_memory_and_chunked_releases_are_identical_and_their_aggregates_right[linear, local]",
        ),
        "every engine divides a user's sum by its size minus one (the 'unbiased' habit): a user's mean leaves the "
        "query's range and its sensitivity (Lipschitz bound / n) no longer holds; memory, chunks and Spark agree",
        (4,),
    ),
    # -- Spark: per-user steps on the executors ----------------------------------------------------------
    Mutant(
        "spark-per-user-steps-not-grouped",
        "engine-bounding",
        "engines/spark.py",
        "return df.repartition(user).sortWithinPartitions(user).mapInPandas(run, schema)",
        "return df.sortWithinPartitions(user).mapInPandas(run, schema)",
        (f"{_SPARK}::test_per_user_aggregates_gather_a_person_s_rows_from_every_partition",),
        "the per-user steps run on each partition as it is: a user whose rows lie in several partitions is "
        "bounded, normalized and randomized once per partition (one contribution per partition)",
        (5,),
    ),
    Mutant(
        "spark-carry-off-by-one",
        "engine-bounding",
        "engines/spark.py",
        "cut = int(other[-1]) + 1 if other.size else 0",
        "cut = int(other[-1]) if other.size else 0",
        (f"{_SPARK}::test_per_user_aggregates_gather_a_person_s_rows_from_every_partition",),
        "an executor's batch keeps the previous user's last row with the carried user: that user is split into "
        "two datasets (two contributions)",
        (5,),
    ),
    Mutant(
        "spark-carry-appended-after-the-batch",
        "engine-bounding",
        "engines/spark.py",
        "pdf = pd.concat([carry, pdf], ignore_index=True)",
        "pdf = pd.concat([pdf, carry], ignore_index=True)",
        (f"{_SPARK}::test_per_user_aggregates_gather_a_person_s_rows_from_every_partition",),
        "the user carried from one Arrow batch to the next is put after the next batch's rows: its rows there "
        "are cut off from the carried ones, and the user is split in two (right while a partition fits one batch)",
        (5,),
    ),
    Mutant(
        "spark-count-tables-merged-by-max",
        "engine-bounding",
        "engines/spark.py",
        'F.sum("_count").alias("_count")',
        'F.max("_count").alias("_count")',
        (f"{_SPARK}::test_per_user_aggregates_gather_a_person_s_rows_from_every_partition",),
        "the partitions' count tables are merged keeping the largest count instead of the sum: right on one "
        "partition, wrong on several",
        (5,),
    ),
    Mutant(
        "spark-user-sizes-min-is-max",
        "engine-bounding",
        "engines/spark.py",
        'F.min("count").alias("lo")',
        'F.max("count").alias("lo")',
        (f"{_SPARK}::test_per_user_aggregates_gather_a_person_s_rows_from_every_partition",),
        "the smallest user size is the largest: a bounded release accepts users of different sizes on Spark",
    ),
    Mutant(
        "spark-bounding-keyed-by-text",
        "keyed-purpose",
        "engines/spark.py",
        'd = data.df.select(user, F.col(item).cast("string").alias(item)).distinct()\n        names',
        'd = data.df.select(F.col(user).cast("string").alias(user), F.col(item).cast("string").alias(item))'
        ".distinct()\n        names",
        (f"{_SPARK}::test_bounded_item_sums_on_spark_equal_the_definition",),
        "on Spark the set union's kept items are drawn from the stream of the user key's text ('7', not 7): "
        "other items than every other engine keeps, so the engines' releases differ",
        (6,),
    ),
    Mutant(
        "spark-edges-driver-limit",
        "refusal",
        "engines/spark.py",
        "        pdf = data.df.select(cols.user, cols.item).distinct().toPandas()  # (no size gate: see the module)",
        "        d = data.df.select(cols.user, cols.item).distinct()\n        if d.count() > 60:\n"
        "            raise DataError('the person-element edges exceed the driver limit')\n        pdf = d.toPandas()",
        ("tests/engines/test_spark_engine.py::test_no_spark_release_is_refused_for_the_size_of_its_data",),
        "Spark refuses the exact distinct count and the policy vocabulary above a number of edges: a dataset just "
        "below releases, the same plus one person is refused (unbounded privacy loss on that pair)",
        (5,),
    ),
    Mutant(
        "spark-key-records-driver-limit",
        "refusal",
        "engines/spark.py",
        '        d = data.df.groupBy(user, F.col(item).cast("string").alias(item)).count()',
        '        d = data.df.groupBy(user, F.col(item).cast("string").alias(item)).count()\n'
        "        if d.count() > 60:\n            raise DataError('the (person, key) pairs exceed the driver limit')",
        ("tests/engines/test_spark_engine.py::test_no_spark_release_is_refused_for_the_size_of_its_data",),
        "Spark refuses the key counts above a number of (person, key) pairs: a data-dependent refusal",
        (5,),
    ),
    Mutant(
        "spark-distinct-default-collects-edges",
        "refusal",
        "releases/distinct.py",
        'method = "bucketed" if eng.name == "spark" else "matching"',
        'method = "matching"',
        ("tests/engines/test_spark_engine.py::test_no_spark_release_is_refused_for_the_size_of_its_data",),
        "the distinct count on Spark collects every edge on the driver by default instead of counting on the "
        "executors",
    ),
    Mutant(
        "duckdb-sizes-count-points-outside",
        "engine-bounding",
        "engines/duckdb.py",
        "                 s AS (SELECT u, count(*) AS n FROM p GROUP BY u)",
        "                 s AS (SELECT u, count(*) AS n FROM {data.view} GROUP BY u)",
        ("tests/engines/test_duckdb_engine.py::test_every_aggregate_equals_the_memory_engine_and_the_definition",),
        "a user's size counts its points outside the box too: a user with points outside weighs less than 1 in "
        "the DuckDB heatmap (the per-user mass bound the sensitivity rests on is no longer what is summed)",
        (4,),
    ),
    Mutant(
        "duckdb-carry-off-by-one",
        "engine-bounding",
        "engines/duckdb.py",
        "        cut = int(other[-1]) + 1 if other.size else 0",
        "        cut = int(other[-1]) if other.size else 0",
        ("tests/engines/test_duckdb_engine.py::test_every_aggregate_equals_the_memory_engine_and_the_definition",),
        "DuckDB's ordered stream cuts a batch one row early: a user's rows are split over two batches, so per-user "
        "steps (means, keyed bounding, sampling) see a user twice",
        (4,),
    ),
    Mutant(
        "duckdb-heavy-persons-one-past-the-cap",
        "contribution-bound",
        "engines/duckdb.py",
        "HAVING count(*) > {cap}) h",
        "HAVING count(*) > {cap} + 1) h",
        ("tests/engines/test_duckdb_engine.py::test_every_aggregate_equals_the_memory_engine_and_the_definition",),
        "persons holding cap + 1 items fall between DuckDB's two paths of the bounded item sums",
    ),
    Mutant(
        "duckdb-key-records-unordered",
        "engine-bounding",
        "engines/duckdb.py",
        'GROUP BY u, {col} ORDER BY u"',
        'GROUP BY u, {col}"',
        ("tests/engines/test_duckdb_engine.py::test_every_aggregate_equals_the_memory_engine_and_the_definition",),
        "DuckDB's key records reach the per-person bounding unordered: a person's keys are split over batches and "
        "bounded twice (up to twice L0 keys counted)",
        (4,),
    ),
    Mutant(
        "duckdb-coded-key-records-ordered-by-key",
        "engine-bounding",
        "engines/duckdb.py",
        'query = f"SELECT u, code, k FROM {coded} ORDER BY u, code"',
        'query = f"SELECT u, code, k FROM {coded} ORDER BY code, u"',
        (_PARTS,
         "tests/engines/test_duckdb_engine.py::test_every_aggregate_equals_the_memory_engine_and_the_definition"),
        "the coded (person, key, records) stream of keys read off the data is ordered by key, not by person: a "
        "person's keys are spread over batches and each batch bounds them again (up to L0 keys per batch)",
        (4,),
    ),
    # -- items outside a declared domain: dropped person by person, never refused ----------------------
    Mutant(
        "domain-outside-refused",
        "refusal",
        "data/domains.py",
        "        return codes_u[inv.reshape(-1)]\n",
        "        if np.any(codes_u < 0):\n"
        "            raise DataError(\"some item values are not in the declared domain\")\n"
        "        return codes_u[inv.reshape(-1)]\n",
        (_OUTSIDE_RELEASE + "[histogram]", _OUTSIDE_DATA),
        "a table with one item outside the public domain is refused: the release on D becomes an error on D plus "
        "one person (a refusal that depends on the data, unbounded privacy loss)",
        (1,),
    ),
    Mutant(
        "dataset-outside-coded-as-first-label",
        "contribution-bound",
        "data/dataset.py",
        "                    users, codes = users[inside], codes[inside]",
        "                    codes = np.where(inside, codes, 0)",
        (_OUTSIDE_RELEASE + "[histogram]", _OUTSIDE_DATA),
        "an item outside the public domain is counted as the domain's first label: the release counts what the "
        "person never held there, and a person outside the domain still contributes",
        (1,),
    ),
    Mutant(
        "lists-outside-kept",
        "contribution-bound",
        "data/dataset.py",
        "        if not inside.all():  # a person left with none is no person",
        "        if False:  # a person left with none is no person",
        (_OUTSIDE_DATA,),
        "per-person lists keep their items outside the domain as code -1 (the last label where it is indexed)",
    ),
    Mutant(
        "duckdb-outside-coded-as-first-label",
        "contribution-bound",
        "engines/duckdb.py",
        'SELECT v.u, d.c FROM {view} v JOIN {dom} d ON CAST(v.i AS VARCHAR) = d.t',
        'SELECT v.u, COALESCE(d.c, 0) AS c FROM {view} v LEFT JOIN {dom} d ON CAST(v.i AS VARCHAR) = d.t',
        (_OUTSIDE_RELEASE + "[histogram]",),
        "on DuckDB (and the chunked engine) an item outside the public domain is counted as its first label",
        (4,),
    ),
    Mutant(
        "memory-words-outside-kept",
        "contribution-bound",
        "engines/memory.py",
        "            inside = codes >= 0  # a word outside the public domain is dropped (OUTSIDE_DOMAIN)",
        "            inside = codes >= -1",
        (f"{_MEMORY}::test_words_outside_a_declared_domain_are_dropped_on_every_engine",),
        "text split into words keeps the words outside the public domain as code -1 (counted as the last label)",
    ),
    Mutant(
        "sort-segments-insertion-skips-the-first",
        "engine-bounding",
        "engines/memory.py",
        "                while k >= a and out[k] > v:",
        "                while k > a and out[k] > v:",
        (f"{_MEMORY}::test_sort_segments_sorts_every_segment_of_any_length_and_range",
         "tests/releases/test_engines_agree.py::test_memory_and_chunked_releases_are_identical_and_their_aggregates_right"),
        "a person's codes are not put in canonical order before the keyed randomization: the released items "
        "depend on the order of the person's rows in the file, and engines reading other orders disagree",
        (4,),
    ),
    Mutant(
        "spark-grid-upper-edge-past-the-last-cell",
        "engine-bounding",
        "engines/spark.py",
        "F.lit(k - 1)).cast(\"long\")",
        "F.lit(k)).cast(\"long\")",
        (f"{_SPARK}::test_grid_sum_in_spark_sql_is_the_memory_engine_s_on_cell_edges",),
        "on Spark a point on the box's upper edge falls past the last cell: its mass lands in the next row's "
        "first cell (or off the grid), not the memory engine's map",
        (4,),
    ),
    Mutant(
        "spark-grid-size-counts-points-outside",
        "sensitivity",
        "engines/spark.py",
        'sizes = p.groupBy("_u")',
        'sizes = data.df.select(F.col(data.columns.user).alias("_u")).groupBy("_u")',
        (f"{_SPARK}::test_grid_sum_in_spark_sql_is_the_memory_engine_s_on_cell_edges",),
        "on Spark a person's size counts the points outside the box: the person's mass inside is below 1, not "
        "the in-memory engine's distribution (the release's utility and its engine agreement break)",
        (4,),
    ),
    Mutant(
        "duckdb-shared-pairs-keep-records",
        "contribution-bound",
        "engines/duckdb.py",
        'self._sql(f"CREATE VIEW {pairs} AS SELECT u, t AS i FROM {self._grouped_table(data)}")',
        'self._sql(f"CREATE VIEW {pairs} AS SELECT u, t AS i FROM {self._grouped_table(data)}, range(k)")',
        ("tests/engines/test_duckdb_engine.py::test_every_aggregate_equals_the_memory_engine_and_the_definition",
         "tests/releases/test_engines_agree.py::test_memory_and_chunked_releases_are_identical_and_their_aggregates_right"),
        "the set union's pairs read off the grouped records repeat a pair once per record: a person holding a "
        "word twice counts twice toward its degree and weights (the set union's sensitivity is exceeded)",
        (4,),
    ),
    Mutant(
        "duckdb-edges-not-ordered-by-person",
        "engine-bounding",
        "engines/duckdb.py",
        't = self._arrow(f"SELECT u, code FROM {coded} ORDER BY u, code")',
        't = self._arrow(f"SELECT u, code FROM {coded} ORDER BY code, u")',
        ("tests/engines/test_duckdb_engine.py::test_every_aggregate_equals_the_memory_engine_and_the_definition",),
        "the distinct count's person-element edges are read in key order: a person's runs are cut wherever another "
        "person's key comes between, and one person becomes several (the count's sensitivity is exceeded)",
        (4,),
    ),
    Mutant(
        "duckdb-key-part-ties-reversed",
        "contribution-bound",
        "engines/duckdb.py",
        "ORDER BY g.k DESC, g.t) AS r",
        "ORDER BY g.k DESC, g.t DESC) AS r",
        (_PARTS,),
        "on DuckDB a person's keys of equal records are ranked in reverse text order: the person keeps other "
        "keys than on every other engine (the counts differ by engine)",
        (4,),
    ),
    Mutant(
        "duckdb-key-part-counts-unclipped",
        "sensitivity",
        "engines/duckdb.py",
        'f"SELECT pos, sum(least(k, {linf}))::BIGINT AS s FROM ({ranked}) WHERE r <= {l0} "',
        'f"SELECT pos, sum(k)::BIGINT AS s FROM ({ranked}) WHERE r <= {l0} "',
        (
            _PARTS,
            "tests/releases/test_counts.py::test_the_key_selection_sees_each_person_s_kept_keys_only",
        ),
        "on DuckDB a person counts all their records on a kept key, not at most Linf: one person moves a count "
        "by more than the noise was calibrated for",
        (4,),
    ),
    Mutant(
        "duckdb-key-part-one-rank-too-many",
        "contribution-bound",
        "engines/duckdb.py",
        'f"SELECT r, least(k, {top_k}) AS k, count(*) AS n FROM ({ranked}) WHERE r <= {top_l} "',
        'f"SELECT r - 1 AS r, least(k, {top_k}) AS k, count(*) AS n FROM ({ranked}) WHERE r <= {top_l} + 1 "',
        (_PARTS,),
        "on DuckDB the bounds' kept records count each person's L0 + 1 keys of most records: GEM scores the "
        "candidates on records the bounds would not keep",
        (4,),
    ),
    Mutant(
        "spark-outside-items-kept-for-sizes",
        "refusal",
        "engines/spark.py",
        "            if isinstance(domain, FiniteDomain):  # items outside the declared domain are dropped here",
        "            if False:  # items outside the declared domain are dropped here",
        (f"{_SPARK}::test_refusals_on_spark",),
        "on Spark the sizes count items outside the domain: one person's outside item makes a bounded release "
        "refuse (unequal sizes) where the other engines release",
        (4,),
    ),
    Mutant(
        "lists-emptied-person-kept",
        "refusal",
        "data/dataset.py",
        "            person = (kept > 0) | (counts == 0)",
        "            person = kept >= 0",
        (_OUTSIDE_DATA,
         "tests/engines/test_duckdb_engine.py::test_outside_items_give_the_same_persons_and_sizes_on_memory_and_duckdb"),
        "a person whose items all lie outside the domain stays as a person with no items: sampling refuses it in "
        "memory, where DuckDB has no such person (a refusal that depends on one person's items)",
        (4,),
    ),
]
